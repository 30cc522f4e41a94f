"""The norm and FP8-quantisation operators: W/Q against the release, structure, hand checks.

Operators: layer_norm, l2_norm, gated_rms_norm, fused_qk_rmsnorm, fused_rmsnorm_quant,
fp8_dynamic_per_token_quant, per_token_group_quant_fp8, moe_sum_reduce. The hand checks
recompute each result a different way (float64 loops, numpy float32 arithmetic, closed
forms) with the documented rounding points, so a wrong rounding point, axis, head map,
scale rule or fp8 format fails them.
"""

from __future__ import annotations

import json
import math
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import torch

from evaluator.operators import (
    _norms_quant,
    fp8_dynamic_per_token_quant,
    fused_qk_rmsnorm,
    fused_rmsnorm_quant,
    gated_rms_norm,
    l2_norm,
    layer_norm,
    moe_sum_reduce,
    per_token_group_quant_fp8,
)
from tests.release import require_release

FP8 = torch.float8_e4m3fn
MODULES: dict[str, ModuleType] = {
    "layer_norm": layer_norm,
    "l2_norm": l2_norm,
    "gated_rms_norm": gated_rms_norm,
    "fused_qk_rmsnorm": fused_qk_rmsnorm,
    "fused_rmsnorm_quant": fused_rmsnorm_quant,
    "fp8_dynamic_per_token_quant": fp8_dynamic_per_token_quant,
    "per_token_group_quant_fp8": per_token_group_quant_fp8,
    "moe_sum_reduce": moe_sum_reduce,
}
FP8_OPERATORS = ("fused_rmsnorm_quant", "fp8_dynamic_per_token_quant", "per_token_group_quant_fp8")

# Published shapes whose stored W/Q our formulas do not reproduce within 1%: none.
WQ_EXCEPTIONS: list[tuple[str, str]] = []

# Small shapes in the spirit of the published ones (non-power-of-two sizes, 3-D layer_norm
# input, GQA ratio 3, several rows), with the expected output structure:
# (init_kwargs, input_kwargs, {leaf name: (shape, dtype)}).
SMALL_CASES: dict[str, list[tuple[dict[str, Any], dict[str, Any], dict]]] = {
    "layer_norm": [
        ({}, {"shape": [5, 1, 72]}, {"out": ((5, 1, 72), torch.bfloat16)}),
        ({}, {"shape": [3, 160]}, {"out": ((3, 160), torch.bfloat16)}),
        ({}, {"shape": []}, {"out": ((1,), torch.bfloat16)}),
    ],
    "l2_norm": [
        (
            {"hidden_size": 96},
            {"num_tokens": 7, "hidden_size": 96},
            {"out": ((7, 96), torch.bfloat16)},
        ),
        (
            {"hidden_size": 64},
            {"num_tokens": 3, "hidden_size": 64, "dtype": "float16"},
            {"out": ((3, 64), torch.float16)},
        ),
    ],
    "gated_rms_norm": [
        (
            {"eps": 1e-6, "norm_before_gate": True, "activation": "silu"},
            {"rows": 9, "hidden_size": 48},
            {"out": ((9, 48), torch.bfloat16)},
        ),
        (
            {"norm_before_gate": False, "activation": "sigmoid"},
            {"rows": 4, "hidden_size": 40},
            {"out": ((4, 40), torch.bfloat16)},
        ),
    ],
    "fused_qk_rmsnorm": [
        (
            {"head_num": 6, "kv_head_num": 2, "size_per_head": 24},
            {
                "num_tokens": 3,
                "head_num": 6,
                "kv_head_num": 2,
                "size_per_head": 24,
                "dtype": "fp16",
            },
            {"out": ((3, 240), torch.float16)},
        ),
        (
            {"head_num": 4, "kv_head_num": 4, "size_per_head": 16},
            {
                "num_tokens": 2,
                "head_num": 4,
                "kv_head_num": 4,
                "size_per_head": 16,
                "dtype": "bf16",
            },
            {"out": ((2, 192), torch.bfloat16)},
        ),
    ],
    "fused_rmsnorm_quant": [
        (
            {},
            {"token_count": 11, "hidden_size": 96},
            {
                "output[0]": ((11, 96), FP8),
                "output[1]": ((11, 1), torch.float32),
                "output[2]": ((11, 96), torch.bfloat16),
            },
        ),
    ],
    "fp8_dynamic_per_token_quant": [
        (
            {},
            {"token_count": 13, "hidden_size": 80},
            {"output[0]": ((13, 80), FP8), "output[1]": ((13,), torch.float32)},
        ),
        (
            {},
            {"token_count": 1, "hidden_size": 48},
            {"output[0]": ((1, 48), FP8), "output[1]": ((1,), torch.float32)},
        ),
    ],
    "per_token_group_quant_fp8": [
        (
            {"group_size": 32},
            {"token_count": 5, "hidden_size": 96},
            {"quantized": ((5, 96), FP8), "scales": ((5, 3), torch.float32)},
        ),
        (
            {"group_size": 128},
            {"token_count": 1, "hidden_size": 256},
            {"quantized": ((1, 256), FP8), "scales": ((1, 2), torch.float32)},
        ),
    ],
    "moe_sum_reduce": [
        (
            {"routed_scaling_factor": 1.0},
            {"token_count": 6, "top_k": 8, "hidden_size": 72},
            {"out": ((6, 72), torch.bfloat16)},
        ),
        (
            {"routed_scaling_factor": 2.5},
            {"token_count": 3, "top_k": 3, "hidden_size": 40},
            {"out": ((3, 40), torch.bfloat16)},
        ),
    ],
}
SMALL_PARAMS = [
    pytest.param(op, init, inp, expected, id=f"{op}-{i}")
    for op, cases in SMALL_CASES.items()
    for i, (init, inp, expected) in enumerate(cases)
]


def _leaves(output: Any) -> dict[str, torch.Tensor]:
    if isinstance(output, dict):
        return {key: output[key] for key in sorted(output)}
    if isinstance(output, tuple):
        return {f"output[{i}]": value for i, value in enumerate(output)}
    return {"out": output}


def _run(
    op: str, init: dict[str, Any], inp: dict[str, Any], seed: int = 0
) -> tuple[dict[str, torch.Tensor], Any]:
    spec = MODULES[op].SPEC
    inputs = spec.make_inputs(device="cpu", seed=seed, **inp)
    return inputs, spec.build_reference(init)(**inputs)


def _bf16(values: Any) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64).to(torch.bfloat16)


def _ulp(exact: torch.Tensor, fraction_bits: int, min_exponent: int) -> torch.Tensor:
    """One step of the target format at each float64 value's magnitude."""
    magnitude = exact.abs().clamp_min(2.0**min_exponent)
    return torch.exp2(torch.floor(torch.log2(magnitude)) - fraction_bits)


def _assert_close_to_exact(
    actual: torch.Tensor, exact: torch.Tensor, *, exact_share: float = 0.99
) -> None:
    """Within one step of ``actual``'s format of the float64 ``exact``, and mostly equal
    to ``exact`` rounded once (fp32 arithmetic may land one step off near ties)."""
    bits, low = {torch.bfloat16: (7, -126), torch.float16: (10, -14)}[actual.dtype]
    error = (actual.double() - exact).abs()
    assert bool((error <= _ulp(exact, bits, low)).all()), float(error.max())
    share = float((actual == exact.to(actual.dtype)).double().mean())
    assert share >= exact_share, share


def _fp8_code(values_f32: np.ndarray) -> torch.Tensor:
    """Saturating e4m3fn codes of numpy float32 values (clamp, then torch's RNE cast)."""
    return torch.from_numpy(np.clip(values_f32, np.float32(-448), np.float32(448))).to(FP8)


# 1. W/Q against the release ------------------------------------------------------------


@pytest.mark.parametrize("op", sorted(MODULES))
def test_work_reproduces_published_roofline_figures(op: str) -> None:
    data_dir = require_release()
    shapes = json.loads((data_dir / op / "shapes.json").read_text())
    roofline = json.loads((data_dir / op / "roofline.json").read_text())["shapes"]
    assert set(shapes) == set(roofline)
    spec = MODULES[op].SPEC
    off: list[tuple[str, str]] = []
    for shape_id, shape in shapes.items():
        work = spec.work(shape["init_kwargs"], shape["input_kwargs"])
        stored = roofline[shape_id]
        assert set(work.w_flops) == set(stored["semantic_W_flops"]), shape_id
        pairs = [(work.w_flops[k], v) for k, v in stored["semantic_W_flops"].items()]
        pairs += [
            (work.q_read, stored["semantic_Q_read_bytes"]),
            (work.q_write, stored["semantic_Q_write_bytes"]),
        ]
        if any(abs(ours - theirs) > 0.01 * theirs for ours, theirs in pairs):
            off.append((op, shape_id))
    assert off == [pair for pair in WQ_EXCEPTIONS if pair[0] == op]


@pytest.mark.parametrize("op", sorted(MODULES))
def test_spec_identity_matches_release_metadata(op: str) -> None:
    metadata = json.loads((require_release() / op / "metadata.json").read_text())
    spec = MODULES[op].SPEC
    assert (spec.slug, spec.atrex_id, spec.dtype, spec.phase) == (
        op,
        metadata["id"],
        metadata["dtype"],
        metadata["phase"],
    )
    assert (op in FP8_OPERATORS) == hasattr(MODULES[op], "CHECKER_NOTES")


# 2. Structure, determinism, inputs untouched ---------------------------------------------


@pytest.mark.parametrize(("op", "init", "inp", "expected"), SMALL_PARAMS)
def test_reference_structure_determinism_and_inputs_untouched(op, init, inp, expected) -> None:
    inputs, output = _run(op, init, inp, seed=7)
    saved = {name: tensor.clone() for name, tensor in inputs.items()}
    leaves = _leaves(output)
    assert {name: (tuple(t.shape), t.dtype) for name, t in leaves.items()} == expected
    assert list(leaves) == list(MODULES[op].SPEC.output_names)
    assert all(type(t) is torch.Tensor and not t.isnan().any() for t in leaves.values())
    again = _leaves(MODULES[op].SPEC.build_reference(init)(**inputs))
    assert all(
        torch.equal(
            leaves[k].view(torch.uint8) if leaves[k].dtype == FP8 else leaves[k],
            again[k].view(torch.uint8) if again[k].dtype == FP8 else again[k],
        )
        for k in leaves
    )
    assert all(torch.equal(saved[name], inputs[name]) for name in inputs)
    for leaf in leaves.values():  # outputs are fresh tensors, never views of an input
        for tensor in inputs.values():
            assert leaf.untyped_storage().data_ptr() != tensor.untyped_storage().data_ptr()


def test_tuple_and_dict_outputs_have_the_upstream_structure() -> None:
    _, quant = _run("fp8_dynamic_per_token_quant", {}, {"token_count": 2, "hidden_size": 32})
    _, fused = _run("fused_rmsnorm_quant", {}, {"token_count": 2, "hidden_size": 32})
    _, group = _run(
        "per_token_group_quant_fp8", {"group_size": 16}, {"token_count": 2, "hidden_size": 32}
    )
    assert type(quant) is tuple and len(quant) == 2
    assert type(fused) is tuple and len(fused) == 3
    assert type(group) is dict and sorted(group) == ["quantized", "scales"]


# 3. Independent hand checks --------------------------------------------------------------


def test_layer_norm_matches_float64_loops_over_the_last_axis_only() -> None:
    inputs, out = _run("layer_norm", {}, {"shape": [3, 2, 20]}, seed=3)
    x, w, b = (inputs[k].double() for k in ("x", "weight", "bias"))
    exact = torch.empty_like(x)
    for i in range(3):
        for j in range(2):
            row = [float(v) for v in x[i, j]]
            mean = sum(row) / len(row)
            var = sum((v - mean) ** 2 for v in row) / len(row)  # biased
            for k, v in enumerate(row):
                exact[i, j, k] = (v - mean) / math.sqrt(var + 1e-5) * float(w[k]) + float(b[k])
    _assert_close_to_exact(out, exact)


def test_layer_norm_closed_form_with_weight_and_bias() -> None:
    x = _bf16([[1.0, -1.0, 1.0, -1.0], [10.0, 12.0, 10.0, 12.0]])  # mean 0 / 11, var 1
    out = layer_norm.Model()(
        x=x, weight=_bf16([2.0, 2.0, 1.0, 1.0]), bias=_bf16([0.5, 0.5, 0.0, 0.0])
    )
    expected = _bf16([[2.5, -1.5, 1.0, -1.0], [-1.5, 2.5, -1.0, 1.0]])
    assert torch.equal(out, expected)


def test_l2_norm_adds_eps_to_the_sum_of_squares() -> None:
    model = l2_norm.Model(hidden_size=4, eps=0.5)
    out = model(x=_bf16([[1.0, 1.0, 1.0, 1.0], [3.0, 4.0, 0.0, 0.0]]))
    # sum 4 + eps 0.5 -> 1/sqrt(4.5); eps on the mean would give 1/sqrt(1.5), max() 0.5.
    expected = _bf16([[1 / math.sqrt(4.5)] * 4, [3 / math.sqrt(25.5), 4 / math.sqrt(25.5), 0, 0]])
    assert torch.equal(out, expected)
    unit = l2_norm.Model(hidden_size=2)(x=_bf16([[3.0, 4.0]]))
    assert torch.equal(unit, _bf16([[0.6, 0.8]]))


def test_l2_norm_matches_float64_loops() -> None:
    inputs, out = _run("l2_norm", {"hidden_size": 96}, {"num_tokens": 5, "hidden_size": 96})
    x = inputs["x"].double()
    exact = torch.stack([row / math.sqrt(float((row * row).sum()) + 1e-6) for row in x])
    _assert_close_to_exact(out, exact)


@pytest.mark.parametrize(
    ("norm_before_gate", "activation"),
    [(True, "silu"), (False, "silu"), (True, "sigmoid"), (False, "swish")],
)
def test_gated_rms_norm_matches_float64_loops(norm_before_gate: bool, activation: str) -> None:
    init = {"norm_before_gate": norm_before_gate, "activation": activation}
    inputs, out = _run("gated_rms_norm", init, {"rows": 6, "hidden_size": 40}, seed=5)
    x, w, z = (inputs[k].double().tolist() for k in ("x", "weight", "z"))
    exact = torch.empty(6, 40, dtype=torch.float64)
    for r in range(6):
        gate = [1 / (1 + math.exp(-v)) * (v if activation != "sigmoid" else 1.0) for v in z[r]]
        row = x[r] if norm_before_gate else [a * g for a, g in zip(x[r], gate, strict=True)]
        inv = 1 / math.sqrt(sum(v * v for v in row) / len(row) + 1e-6)
        for h in range(40):
            value = row[h] * inv * w[h]
            exact[r, h] = value * gate[h] if norm_before_gate else value
    _assert_close_to_exact(out, exact)


def test_gated_rms_norm_rejects_an_unknown_activation() -> None:
    with pytest.raises(ValueError, match="activation"):
        gated_rms_norm.Model(activation="gelu")


def _qk_expected(
    hidden: torch.Tensor,
    q_weight: torch.Tensor,
    k_weight: torch.Tensor,
    heads: tuple[int, int],
    dim: int,
) -> torch.Tensor:
    """Per-head loops: y = rnd(x / rms) in float64 then rounded; out = rnd(w * y)."""
    q_heads, kv_heads = heads
    dtype = hidden.dtype
    expected = hidden.clone()
    for t in range(hidden.shape[0]):
        for head in range(q_heads + kv_heads):
            weight = q_weight if head < q_heads else k_weight
            cols = slice(head * dim, (head + 1) * dim)
            values = hidden[t, cols].double()
            inv = 1 / math.sqrt(float((values * values).sum()) / dim + 1e-6)
            y = (values * inv).to(dtype)  # first rounding point
            expected[t, cols] = (weight.double() * y.double()).to(dtype)  # second
    return expected


def test_fused_qk_rmsnorm_head_map_and_double_rounding() -> None:
    heads, dim = (6, 2), 24
    inp = {"num_tokens": 4, "head_num": 6, "kv_head_num": 2, "size_per_head": dim}
    inputs, out = _run(
        "fused_qk_rmsnorm", {"head_num": 6, "kv_head_num": 2, "size_per_head": dim}, inp, seed=11
    )
    hidden, q_w, k_w = inputs["hidden_states"], inputs["q_weight"], inputs["k_weight"]
    expected = _qk_expected(hidden, q_w, k_w, heads, dim)
    # value heads (the last 2 * 24 columns) are copied bit for bit
    assert torch.equal(out[:, 8 * dim :], hidden[:, 8 * dim :])
    error = (out.double() - expected.double()).abs()
    assert bool((error <= _ulp(expected.double(), 10, -14)).all())
    assert float((out == expected).double().mean()) >= 0.99
    # swapping the two weights (a wrong head map) must change the q and k heads
    swapped = _qk_expected(hidden, k_w, q_w, heads, dim)
    assert float((out == swapped).double().mean()) < 0.5


def test_fused_qk_rmsnorm_rounds_before_the_weight_product() -> None:
    model = fused_qk_rmsnorm.Model(head_num=64, kv_head_num=8, size_per_head=128)
    inputs = fused_qk_rmsnorm.make_inputs(
        device=torch.device("cpu"),
        generator=torch.Generator().manual_seed(1),
        num_tokens=2,
        head_num=64,
        kv_head_num=8,
    )
    out = model(**inputs)
    heads = inputs["hidden_states"].float().reshape(2, 80, 128)
    inv = torch.rsqrt(heads.square().mean(-1, keepdim=True) + 1e-6)
    single = (
        heads
        * inv
        * torch.cat(
            [
                inputs["q_weight"].float().expand(64, 128),
                inputs["k_weight"].float().expand(8, 128),
                torch.ones(8, 128),
            ]
        )
    ).to(torch.float16)
    differs = float((out.reshape(2, 80, 128)[:, :72] != single[:, :72]).double().mean())
    assert differs > 0.01  # the one-rounding variant is a different reference


def test_fused_rmsnorm_quant_hand_built_rows() -> None:
    x = _bf16([[2.0, -2.0, 2.0, -2.0], [0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    residual = _bf16([[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    weight = _bf16([1.0, 0.5, 0.25, 1.0])
    quantized, scale, residual_out = fused_rmsnorm_quant.Model()(
        x=x, residual=residual, weight=weight
    )
    # row 0: rms 2 -> n = [1, -0.5, 0.25, -1]; amax 1 -> scale 1/448 -> codes n * 448.
    # row 1: all zero -> scale 1, codes 0. row 2: r = 2 -> n = weight, codes 448 * w.
    assert quantized.dtype == FP8 and scale.shape == (3, 1)
    assert quantized.float().tolist() == [
        [448.0, -224.0, 112.0, -448.0],
        [0.0] * 4,
        [448.0, 224.0, 112.0, 448.0],
    ]
    third = float(np.float32(1) / np.float32(448))
    assert scale.flatten().tolist() == [third, 1.0, third]
    assert torch.equal(residual_out, x + residual)


def test_fused_rmsnorm_quant_matches_an_independent_numpy_emulation() -> None:
    inputs, (quantized, scale, residual_out) = _run(
        "fused_rmsnorm_quant", {}, {"token_count": 6, "hidden_size": 96}, seed=2
    )
    r = (inputs["x"].double() + inputs["residual"].double()).to(torch.bfloat16)
    assert torch.equal(residual_out, r)
    exact = (
        torch.stack([row / math.sqrt(float((row * row).mean()) + 1e-5) for row in r.double()])
        * inputs["weight"].double()
    )
    normed = exact.to(torch.bfloat16).float().numpy()  # the single bf16 rounding point
    amax = np.abs(normed).max(axis=1, keepdims=True)
    expected_scale = amax / np.float32(448)  # numpy float32: a true IEEE division
    codes = _fp8_code(normed / expected_scale)
    assert np.array_equal(scale.numpy(), expected_scale)
    assert float((quantized.float() != codes.float()).double().mean()) <= 0.01
    assert bool((quantized.float().abs().amax(dim=1) == 448).all())


def test_fp8_dynamic_per_token_quant_hand_built_rows() -> None:
    x = _bf16([[1.0, -2.0, 0.5, 4.0], [0.0, 0.0, 0.0, 0.0], [-448.0, 1.0, 2.0, 3.0]])
    q, scale = fp8_dynamic_per_token_quant.Model()(x=x)
    assert q.dtype == FP8 and scale.shape == (3,) and scale.dtype == torch.float32
    assert q.float().tolist() == [[112.0, -224.0, 56.0, 448.0], [0.0] * 4, [-448.0, 1.0, 2.0, 3.0]]
    expected = np.array([4, 1e-12, 448], dtype=np.float32) / np.float32(448)
    assert np.array_equal(scale.numpy(), expected)


def test_fp8_dynamic_per_token_quant_multiplies_by_the_reciprocal() -> None:
    # 1 M elements: multiplying by 1/scale and dividing by scale give different codes
    # for about 1e-4 of them, so the reference is pinned to the reciprocal form.
    inputs, (q, scale) = _run(
        "fp8_dynamic_per_token_quant", {}, {"token_count": 256, "hidden_size": 4096}, seed=4
    )
    x = inputs["x"].float().numpy()
    expected_scale = np.maximum(np.abs(x).max(axis=1), np.float32(1e-12)) / np.float32(448)
    inverse = np.float32(1) / expected_scale
    by_reciprocal = _fp8_code(x * inverse[:, None]).view(torch.uint8)
    by_division = _fp8_code(x / expected_scale[:, None]).view(torch.uint8)
    assert np.array_equal(scale.numpy(), expected_scale)
    assert torch.equal(q.view(torch.uint8), by_reciprocal)
    assert not torch.equal(q.view(torch.uint8), by_division)


def test_per_token_group_quant_fp8_hand_built_groups() -> None:
    x = _bf16(
        [[1.0, -2.0, 0.5, 4.0, 0.0, 0.0, 0.0, 0.0], [3.0, 0.75, -1.5, 0.375, 1.0, -8.0, 2.0, 0.0]]
    )
    out = per_token_group_quant_fp8.Model(group_size=4)(x=x)
    # true division by s = max/448 on each group of 4; an all-zero group: s = 1e-10, codes 0
    assert out["quantized"].float().tolist() == [
        [112.0, -224.0, 56.0, 448.0, 0.0, 0.0, 0.0, 0.0],
        [448.0, 112.0, -224.0, 56.0, 56.0, -448.0, 112.0, 0.0],
    ]
    expected = np.array([[4, 0], [3, 8]], dtype=np.float32) / np.float32(448)
    expected[0, 1] = np.float32(1e-10)
    assert np.array_equal(out["scales"].numpy(), expected)


def test_per_token_group_quant_fp8_matches_numpy_division_per_group() -> None:
    inputs, out = _run(
        "per_token_group_quant_fp8",
        {"group_size": 32},
        {"token_count": 64, "hidden_size": 512},
        seed=6,
    )
    x = inputs["x"].float().numpy().reshape(64, 16, 32)
    scales = np.maximum(np.abs(x).max(axis=2) / np.float32(448), np.float32(1e-10))
    codes = _fp8_code((x / scales[:, :, None]).reshape(64, 512))
    by_reciprocal = _fp8_code((x * (np.float32(1) / scales)[:, :, None]).reshape(64, 512))
    assert np.array_equal(out["scales"].numpy(), scales)
    assert torch.equal(out["quantized"].view(torch.uint8), codes.view(torch.uint8))
    # here it is a true division: the reciprocal form gives other codes on this input
    assert not torch.equal(out["quantized"].view(torch.uint8), by_reciprocal.view(torch.uint8))


def test_per_token_group_quant_fp8_chunks_rows_without_changing_results(monkeypatch) -> None:
    inputs, whole = _run(
        "per_token_group_quant_fp8",
        {"group_size": 16},
        {"token_count": 10, "hidden_size": 64},
        seed=9,
    )
    monkeypatch.setattr(_norms_quant, "CHUNK_ELEMENTS", 3 * 64)  # chunks of 3 rows
    chunked = per_token_group_quant_fp8.Model(group_size=16)(**inputs)
    assert torch.equal(whole["quantized"].view(torch.uint8), chunked["quantized"].view(torch.uint8))
    assert torch.equal(whole["scales"], chunked["scales"])


def test_fp8_references_saturate_instead_of_producing_nan() -> None:
    assert _norms_quant.saturating_fp8(torch.tensor([1e6, -500.0, 449.0])).float().tolist() == [
        448.0,
        -448.0,
        448.0,
    ]


@pytest.mark.parametrize("factor", [1.0, 2.5])
def test_moe_sum_reduce_matches_float64_loops(factor: float) -> None:
    inputs, out = _run(
        "moe_sum_reduce",
        {"routed_scaling_factor": factor},
        {"token_count": 5, "top_k": 8, "hidden_size": 24},
        seed=8,
    )
    experts = inputs["expert_outputs"].double()
    exact = torch.empty(5, 24, dtype=torch.float64)
    for t in range(5):
        for h in range(24):
            exact[t, h] = sum(float(experts[t, s, h]) for s in range(8)) * factor
    _assert_close_to_exact(out, exact)


def test_moe_sum_reduce_sums_over_the_top_k_axis() -> None:
    experts = torch.zeros(2, 3, 4, dtype=torch.bfloat16)
    experts[0, :, 0] = _bf16([1.0, 2.0, 4.0])
    experts[1, 2, 3] = 0.5
    out = moe_sum_reduce.Model(routed_scaling_factor=2.0)(expert_outputs=experts)
    assert out.tolist() == [[14.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]]


# 4. Input generation ---------------------------------------------------------------------


def _draws(
    seed: int, *draws: tuple[tuple[int, ...], torch.dtype, float | None]
) -> list[torch.Tensor]:
    """The documented draws, in order, from one freshly seeded CPU generator."""
    generator = torch.Generator().manual_seed(seed)
    tensors = []
    for shape, dtype, scale in draws:
        tensor = torch.randn(shape, dtype=dtype, generator=generator)
        tensors.append(tensor if scale is None else tensor * scale)
    return tensors


BF = torch.bfloat16
DRAW_CASES = [
    (
        "layer_norm",
        {"shape": [4, 1, 24]},
        ["x", "weight", "bias"],
        [((4, 1, 24), BF, None), ((24,), BF, None), ((24,), BF, None)],
        {},
    ),
    ("l2_norm", {"num_tokens": 3, "hidden_size": 32}, ["x"], [((3, 32), BF, None)], {}),
    (
        "l2_norm",
        {"num_tokens": 3, "hidden_size": 32, "dtype": "float32"},
        ["x"],
        [((3, 32), torch.float32, None)],
        {},
    ),
    (
        "gated_rms_norm",
        {"rows": 5, "hidden_size": 16},
        ["x", "weight", "z"],
        [((5, 16), BF, 0.02), ((16,), BF, 0.02), ((5, 16), BF, None)],
        {"weight": 1.0},
    ),
    (
        "fused_qk_rmsnorm",
        {"num_tokens": 2, "head_num": 3, "kv_head_num": 1, "size_per_head": 8},
        ["hidden_states", "q_weight", "k_weight"],
        [((2, 40), torch.float16, None), ((8,), torch.float16, None), ((8,), torch.float16, None)],
        {},
    ),
    (
        "fused_qk_rmsnorm",
        {"num_tokens": 2, "head_num": 3, "kv_head_num": 1, "size_per_head": 8, "dtype": "bf16"},
        ["hidden_states", "q_weight", "k_weight"],
        [((2, 40), BF, None), ((8,), BF, None), ((8,), BF, None)],
        {},
    ),
    (
        "fused_rmsnorm_quant",
        {"token_count": 3, "hidden_size": 16},
        ["x", "residual", "weight"],
        [((3, 16), BF, None), ((3, 16), BF, None), ((16,), BF, None)],
        {},
    ),
    (
        "fp8_dynamic_per_token_quant",
        {"token_count": 3, "hidden_size": 16},
        ["x"],
        [((3, 16), BF, None)],
        {},
    ),
    (
        "per_token_group_quant_fp8",
        {"token_count": 3, "hidden_size": 16},
        ["x"],
        [((3, 16), BF, None)],
        {},
    ),
    (
        "moe_sum_reduce",
        {"token_count": 3, "top_k": 4, "hidden_size": 16},
        ["expert_outputs"],
        [((3, 4, 16), BF, 0.02)],
        {},
    ),
]


@pytest.mark.parametrize(
    ("op", "inp", "names", "draws", "offsets"),
    DRAW_CASES,
    ids=[f"{case[0]}-{i}" for i, case in enumerate(DRAW_CASES)],
)
def test_inputs_follow_the_documented_draws_in_order(op, inp, names, draws, offsets) -> None:
    inputs = MODULES[op].SPEC.make_inputs(device="cpu", seed=123, **inp)
    assert list(inputs) == names
    expected = _draws(123, *draws)
    for name, tensor in zip(names, expected, strict=True):
        tensor = tensor + offsets[name] if name in offsets else tensor
        assert inputs[name].dtype == tensor.dtype and inputs[name].shape == tensor.shape
        assert torch.equal(inputs[name], tensor), name
    if len(draws) > 1:  # the order matters: drawing in reverse gives other tensors
        reverse = _draws(123, *reversed(draws))
        assert not torch.equal(reverse[-1], inputs[names[0]])
    other = MODULES[op].SPEC.make_inputs(device="cpu", seed=124, **inp)
    assert not torch.equal(other[names[0]], inputs[names[0]])


def test_input_statistics_match_the_documented_scales() -> None:
    gated = gated_rms_norm.SPEC.make_inputs(device="cpu", seed=1, rows=512, hidden_size=128)
    assert abs(float(gated["x"].float().std()) - 0.02) < 0.001
    assert abs(float(gated["weight"].float().mean()) - 1.0) < 0.01
    assert 0.01 < float(gated["weight"].float().std()) < 0.03
    assert abs(float(gated["z"].float().std()) - 1.0) < 0.02
    moe = moe_sum_reduce.SPEC.make_inputs(
        device="cpu", seed=1, token_count=64, top_k=8, hidden_size=128
    )
    assert abs(float(moe["expert_outputs"].float().std()) - 0.02) < 0.001
    norm = layer_norm.SPEC.make_inputs(device="cpu", seed=1, shape=[64, 1, 1152])
    for name in ("x", "weight", "bias"):  # weight and bias are N(0,1), not ones / zeros
        assert abs(float(norm[name].float().std()) - 1.0) < 0.1
    fused = fused_rmsnorm_quant.SPEC.make_inputs(
        device="cpu", seed=1, token_count=4, hidden_size=2048
    )
    assert abs(float(fused["weight"].float().std()) - 1.0) < 0.1


# 5. Cheap published shapes run on CPU ----------------------------------------------------


def _published(max_bytes: int) -> list[Any]:
    try:
        data_dir = require_release()
    except pytest.skip.Exception:
        return []
    params = []
    for op in sorted(MODULES):
        shapes = json.loads((data_dir / op / "shapes.json").read_text())
        for shape_id, shape in shapes.items():
            work = MODULES[op].SPEC.work(shape["init_kwargs"], shape["input_kwargs"])
            if work.q_read + work.q_write <= max_bytes:
                params.append(pytest.param(op, shape_id, shape, id=f"{op}-{shape_id}"))
    return params


@pytest.mark.parametrize(("op", "shape_id", "shape"), _published(max_bytes=2_500_000))
def test_cheap_published_shapes_run_on_cpu(op: str, shape_id: str, shape: dict) -> None:
    spec = MODULES[op].SPEC
    inputs = spec.make_inputs(device="cpu", seed=0, **shape["input_kwargs"])
    output = spec.build_reference(shape["init_kwargs"])(**inputs)
    leaves = _leaves(output)
    assert list(leaves) == list(spec.output_names)
    first = next(iter(inputs.values()))
    assert leaves[spec.output_names[0]].shape[0] == first.shape[0]
    assert not any(t.float().isnan().any() for t in leaves.values())
