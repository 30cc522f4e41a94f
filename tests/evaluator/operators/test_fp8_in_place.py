"""The fp8 operators quantise in place (one fp32 temporary instead of one per step) and get
the same bits as the out-of-place code they replaced (bench/fp8_out_of_place.py): every
smoke shape's inputs and reference outputs, byte for byte; the reference leaves its inputs
alone; and the helpers on the edge values (zeros of both signs, saturation, a block whose
most negative value outweighs its maximum). bench/h200_session/fp8_quantise_check.py does
the same on CUDA at real v1 shapes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from evaluator.operators import _moe_gemm, _norms_quant
from evaluator.suite import load_suite

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

import fp8_out_of_place as before  # noqa: E402

SUITE = load_suite("atrex-bench-v1")


@pytest.mark.parametrize("operator", before.OPERATORS)
def test_every_smoke_shape_gets_the_bits_of_the_out_of_place_code(operator):
    shapes = SUITE.shapes_for(operator, "smoke")
    assert shapes
    for shape in shapes:
        found = before.compare_shape(operator, shape.init_kwargs, shape.input_kwargs)
        assert found["differ"] == [], (shape.shape_id, found)
        assert found["inputs_untouched"], shape.shape_id


def _edge_values() -> torch.Tensor:
    """(4, 8) fp32 in 2 x 4 blocks: -0.0 and +0.0 only; a negative maximum magnitude; values
    that saturate once divided by a clamped scale; ordinary values."""
    values = torch.tensor(
        [
            [-0.0, 0.0, -0.0, -0.0, 3.0, -7.5, 1e-30, 2.0],
            [0.0, -0.0, -0.0, 0.0, 6.0, 0.5, -1e-30, -2.0],
            [1e-14, -1e-14, 5e-13, 0.0, 1e6, -1e6, 448.0, -449.0],
            [2e-13, -3e-13, 0.0, -1e-13, 3.25, -0.125, 0.0, 1.0],
        ],
        dtype=torch.float32,
    )
    assert values.shape == (4, 8)
    return values


@pytest.mark.parametrize("signed", [False, True])
def test_block_max_is_the_old_one_on_edge_values(signed):
    values = _edge_values()
    got = _moe_gemm.block_max(values, 2, 4, signed=signed)
    assert before.same_bits(got, before.block_max(values, 2, 4, signed=signed))
    if not signed:
        assert got[0, 0].item() == 0.0 and not torch.signbit(got[0, 0])  # +0, as abs gives


@pytest.mark.parametrize("divide", [False, True])
def test_scale_blocks_in_place_writes_the_old_values_into_its_argument(divide):
    values = _edge_values()
    scales = torch.tensor([[1e-12, 3.0], [0.5, 7.0]], dtype=torch.float32)
    expected = before.scale_blocks(values, scales, 2, 4, divide=divide)
    owned = values.clone()
    got = _moe_gemm.scale_blocks(owned, scales, 2, 4, divide=divide, in_place=True)
    assert before.same_bits(got, expected) and before.same_bits(owned, expected)
    assert before.same_bits(_moe_gemm.scale_blocks(values, scales, 2, 4, divide=divide), expected)
    with pytest.raises(ValueError, match="contiguous"):
        _moe_gemm.scale_blocks(values.T.contiguous().T, scales, 2, 4, in_place=True)


@pytest.mark.parametrize("helpers", [_moe_gemm, _norms_quant])
def test_saturating_fp8_in_place_gives_the_old_codes(helpers):
    values = torch.cat([_edge_values().flatten() * 1e3, torch.tensor([float("nan"), 449.0])])
    expected = before.saturating_fp8(values)
    owned = values.clone()
    got = helpers.saturating_fp8(owned, in_place=True)
    assert before.same_bits(got, expected)
    assert before.same_bits(helpers.saturating_fp8(values), expected)
    assert owned.abs().nan_to_num().max() <= 448.0  # clamped where it lay


def test_fp32_copy_never_aliases_its_argument_and_is_contiguous():
    values = torch.ones(3)
    copy = _moe_gemm.fp32_copy(values)
    copy.add_(1.0)
    assert values.tolist() == [1.0, 1.0, 1.0]
    transposed = _edge_values().T  # a strided view, as an input may be
    copied = _moe_gemm.fp32_copy(transposed.to(torch.bfloat16))
    assert copied.is_contiguous() and torch.equal(copied, transposed.to(torch.bfloat16).float())


def test_the_fp8_moe_reference_takes_strided_weights_and_gives_the_old_bits():
    from evaluator.operators import fp8_blockscale_fused_moe as module

    shape = SUITE.shapes_for(module.SPEC.slug, "smoke")[0]
    inputs = module.SPEC.make_inputs(device="cpu", seed=7, **shape.input_kwargs)
    # The same values, laid out column-major: every weight a transposed view's transpose.
    strided = {
        name: (t.transpose(-1, -2).contiguous().transpose(-1, -2) if t.dim() >= 2 else t)
        for name, t in inputs.items()
    }
    assert not strided["w1"].is_contiguous()
    model = module.SPEC.build_reference(shape.init_kwargs)
    got = model(**strided)
    with before.out_of_place():
        expected = module.SPEC.build_reference(shape.init_kwargs)(**inputs)
    assert before.same_bits(got, expected)


def test_check_blocks_refuses_a_shape_that_does_not_tile():
    assert _moe_gemm.check_blocks(256, 384, 128, 128) == (2, 3)
    with pytest.raises(ValueError, match="does not tile"):
        _moe_gemm.check_blocks(256, 300, 128, 128)


def test_the_comparison_sees_a_one_bit_difference(monkeypatch):
    # The check can fail: one code of the reference's output one step off is caught.
    from evaluator.operators import fp8_dynamic_per_token_quant as module

    honest = module.Model.forward

    def off_by_one_code(self, x):
        q, scale = honest(self, x)
        q = q.clone()
        q.view(torch.uint8)[0, 0] ^= 1
        return q, scale

    monkeypatch.setattr(module.Model, "forward", off_by_one_code)
    shape = SUITE.shapes_for("fp8_dynamic_per_token_quant", "smoke")[0]
    found = before.compare_shape(module.SPEC.slug, shape.init_kwargs, shape.input_kwargs)
    assert found["differ"] == ["out[0]"]
