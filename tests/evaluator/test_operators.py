"""The built-in operators: references, input generators, work models, registry."""

from __future__ import annotations

import json

import pytest
import torch

from evaluator.correctness import compare_outputs
from evaluator.errors import UnknownOperatorError
from evaluator.operators import OPERATORS, get_operator
from tests.release import require_release

from .conftest import KNOWN

BF16 = torch.bfloat16
CPU = torch.device("cpu")


def bf16(values):
    return torch.tensor(values, dtype=BF16)


def test_registry_holds_the_foundation_operators():
    assert set(KNOWN) <= set(OPERATORS)
    assert get_operator("rms_norm").atrex_id == "atrex_027"
    assert get_operator("silu_and_mul").atrex_id == "atrex_028"
    assert get_operator("fused_add_rms_norm").atrex_id == "atrex_008"


def test_unknown_operator_names_the_known_ones():
    with pytest.raises(UnknownOperatorError) as caught:
        get_operator("rmsnorm")
    assert "rmsnorm" in caught.value.message
    assert "rms_norm" in caught.value.message


def test_rms_norm_hand_computed():
    # mean of squares 7.5, 1/sqrt(7.5) = 0.36515; bf16 steps 2^-9 .. 2^-6 in these ranges.
    out = get_operator("rms_norm").build_reference({"eps": 1e-6})(
        x=bf16([[1.0, 2.0, 3.0, 4.0]]), weight=bf16([1.0, 1.0, 1.0, 2.0])
    )
    assert out.dtype == BF16
    assert out.tolist() == [[0.365234375, 0.73046875, 1.09375, 2.921875]]


def test_silu_and_mul_rounds_silu_to_bf16_before_the_product():
    # silu(1) = 0.73106 -> bf16 0.73046875; * 9 = 6.5742 -> bf16 6.5625. Without the
    # intermediate rounding the answer would be 6.59375.
    out = get_operator("silu_and_mul").build_reference({})(x=bf16([[1.0, -1.0, 9.0, 7.0]]))
    assert out.shape == (1, 2)
    assert out.tolist() == [[6.5625, -1.890625]]


def test_fused_add_rms_norm_hand_computed():
    # r = [1.5, -2.0]; mean of squares 3.125; out = r * 0.565685 * w.
    out = get_operator("fused_add_rms_norm").build_reference({"eps": 1e-6})(
        x=bf16([[0.5, 1.0]]), residual=bf16([[1.0, -3.0]]), weight=bf16([1.0, 2.0])
    )
    assert set(out) == {"out", "residual"}
    assert out["residual"].tolist() == [[1.5, -2.0]]
    assert out["out"].tolist() == [[0.84765625, -2.265625]]


def test_fused_add_rms_norm_statistics_use_the_rounded_sum():
    spec = get_operator("fused_add_rms_norm")
    inputs = spec.make_inputs(device=CPU, seed=7, token_count=4, hidden_size=96)
    out = spec.build_reference({"eps": 1e-6})(**inputs)
    summed = (inputs["x"] + inputs["residual"]).float()
    expected = (
        summed * torch.rsqrt(summed.pow(2).mean(-1, keepdim=True) + 1e-6) * inputs["weight"].float()
    ).to(BF16)
    assert torch.equal(out["out"], expected)
    assert torch.equal(out["residual"], inputs["x"] + inputs["residual"])


@pytest.mark.parametrize("operator", KNOWN)
def test_references_run_on_smoke_shapes_with_documented_structure(operator, tiny_suite):
    from evaluator.suite import load_suite

    spec = get_operator(operator)
    for shape in load_suite("atrex-bench-v0.1").shapes_for(operator, "smoke"):
        inputs = spec.make_inputs(device=CPU, seed=1, **shape.input_kwargs)
        assert all(t.dtype == BF16 for t in inputs.values())
        out = spec.build_reference(shape.init_kwargs)(**inputs)
        outputs = out if isinstance(out, dict) else {"out": out}
        assert tuple(sorted(outputs)) == tuple(sorted(spec.output_names))
        for tensor in outputs.values():
            assert type(tensor) is torch.Tensor and tensor.dtype == BF16
            assert torch.isfinite(tensor.float()).all()


def test_make_inputs_draws_in_the_documented_order_and_scale():
    spec = get_operator("rms_norm")
    inputs = spec.make_inputs(device=CPU, seed=123, token_count=5, hidden_size=64)
    generator = torch.Generator().manual_seed(123)
    x = torch.randn((5, 64), dtype=BF16, generator=generator) * 0.02
    weight = torch.randn((64,), dtype=BF16, generator=generator) * 0.02 + 1.0
    assert torch.equal(inputs["x"], x) and torch.equal(inputs["weight"], weight)
    again = spec.make_inputs(device=CPU, seed=123, token_count=5, hidden_size=64)
    assert torch.equal(again["x"], inputs["x"])
    other = spec.make_inputs(device=CPU, seed=124, token_count=5, hidden_size=64)
    assert not torch.equal(other["x"], inputs["x"])


def test_fused_add_rms_norm_residual_is_unscaled_normal():
    inputs = get_operator("fused_add_rms_norm").make_inputs(
        device=CPU, seed=3, token_count=64, hidden_size=256
    )
    assert 0.8 < float(inputs["residual"].float().std()) < 1.2
    assert float(inputs["x"].float().std()) < 0.05
    assert float((inputs["weight"].float() - 1).abs().max()) < 0.2


def test_silu_and_mul_empty_shape_means_one_element():
    inputs = get_operator("silu_and_mul").make_inputs(device=CPU, seed=0, shape=[])
    assert inputs["x"].shape == (1,)


@pytest.mark.parametrize("operator", KNOWN)
def test_work_model_matches_every_published_shape(operator):
    directory = require_release() / operator
    shapes = json.loads((directory / "shapes.json").read_text())
    roofline = json.loads((directory / "roofline.json").read_text())["shapes"]
    spec = get_operator(operator)
    assert set(shapes) == set(roofline)
    for shape_id, shape in shapes.items():
        published = roofline[shape_id]
        work = spec.work(shape["init_kwargs"], shape["input_kwargs"])
        assert set(work.w_flops) == set(published["semantic_W_flops"])
        for dtype, flops in published["semantic_W_flops"].items():
            assert work.w_flops[dtype] == pytest.approx(flops, rel=0.01), shape_id
        assert work.q_read == pytest.approx(published["semantic_Q_read_bytes"], rel=0.01)
        assert work.q_write == pytest.approx(published["semantic_Q_write_bytes"], rel=0.01)


NAN, NEG_INF = float("nan"), float("-inf")


def test_topk_filter_keeps_a_nan_logit_where_the_release_keeps_it():
    # torch.topk ranks NaN above every number: row 0's threshold for k' = 2 is 3.0, and the
    # NaN is not below it, so it stays. Row 1 has two NaNs, so its threshold is NaN, below
    # which nothing lies: the row comes back unchanged.
    logits = torch.tensor([[1.0, NAN, 3.0, 2.0, 0.0], [NAN, NAN, 1.0, 2.0, 3.0]])
    out = get_operator("topk_filter").build_reference({"top_k": 2})(logits=logits)
    expected = torch.tensor([[NEG_INF, NAN, 3.0, NEG_INF, NEG_INF], [NAN, NAN, 1.0, 2.0, 3.0]])
    torch.testing.assert_close(out, expected, rtol=0, atol=0, equal_nan=True)


def test_topk_filter_nan_must_be_matched_in_place_by_the_correctness_check():
    spec = get_operator("topk_filter")
    logits = torch.randn((3, 400), generator=torch.Generator().manual_seed(5))
    logits[0, 7] = logits[2, 100] = NAN
    reference = spec.build_reference({"top_k": 50})(logits=logits)
    assert int(reference.isnan().sum()) == 2

    same = compare_outputs(reference, reference.clone(), policy=spec.policy, shape_id="nan")
    assert same.ok, same.error
    masked = torch.where(reference.isnan(), NEG_INF, reference)  # a kernel masking NaN
    differs = compare_outputs(reference, masked, policy=spec.policy, shape_id="nan")
    assert not differs.ok
    assert differs.mismatch_share == pytest.approx(2 / reference.numel())
