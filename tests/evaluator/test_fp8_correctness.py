"""fp8 outputs compared as codes on the e4m3fn grid (DECISIONS.md 5), with their scales.

The reference passes against itself with no code off; a few codes one step off pass and
their share is reported; too many one step off, two steps, a wrong scale, an all-zero or
constant answer and a NaN fail; the honest Triton baseline kernels pass in the
interpreter on CPU.
"""

from __future__ import annotations

import pytest
import torch

from evaluator import correctness
from evaluator.correctness import check_shape, compare_fp8_codes, compare_outputs
from evaluator.operators import get_operator
from evaluator.operators.base import CorrectnessPolicy, Fp8CodePolicy

from .conftest import TRITON_BASELINE

CPU = torch.device("cpu")
FP8 = torch.float8_e4m3fn

QUANT_OPERATORS = {
    # operator: (init kwargs, input kwargs, code leaf, scale leaf)
    "fp8_dynamic_per_token_quant": ({}, {"token_count": 48, "hidden_size": 512}, 0, 1),
    "per_token_group_quant_fp8": (
        {"group_size": 128},
        {"token_count": 48, "hidden_size": 512},
        "quantized",
        "scales",
    ),
    "fused_rmsnorm_quant": ({}, {"token_count": 48, "hidden_size": 512}, 0, 1),
}


def reference_of(operator: str, seed: int = 3, **input_kwargs):
    init_kwargs, default_inputs, _, _ = QUANT_OPERATORS[operator]
    spec = get_operator(operator)
    inputs = spec.make_inputs(device=CPU, seed=seed, **(input_kwargs or default_inputs))
    return spec, inputs, spec.build_reference(init_kwargs)(**inputs)


def replaced(output, key, value):
    """The output structure with one leaf replaced (tuples stay tuples, dicts dicts)."""
    if isinstance(output, dict):
        return {**output, key: value}
    leaves = list(output)
    leaves[key] = value
    return tuple(leaves)


def reference_codes(operator, reference):
    return reference[QUANT_OPERATORS[operator][2]].clone()


def leaf_name(key) -> str:
    """A leaf's name in the checker's messages."""
    return f"output[{key}]" if isinstance(key, int) else key


def grid_position(codes: torch.Tensor) -> torch.Tensor:
    """Independent of the checker: the index of each code's value among the sorted finite
    e4m3fn values (-0 and +0 share one)."""
    finite = torch.arange(256, dtype=torch.int16).to(torch.uint8).view(FP8).float()
    values = torch.unique(finite[~finite.isnan()])
    assert values.numel() == 253
    return torch.searchsorted(values, codes.float().contiguous())


def moved(codes: torch.Tensor, index: torch.Tensor, steps: int) -> torch.Tensor:
    """``codes`` with the (flat) elements ``index`` moved ``steps`` along the e4m3fn grid,
    toward zero for positive steps (so no code leaves the grid)."""
    finite = torch.arange(256, dtype=torch.int16).to(torch.uint8).view(FP8).float()
    values = torch.unique(finite[~finite.isnan()])
    flat = codes.clone().reshape(-1)
    position = grid_position(flat[index])
    toward_zero = torch.where(position > 126, position - steps, position + steps)
    toward_zero = torch.where(position == 126, position + steps, toward_zero)  # 0 moves up
    flat[index] = values[toward_zero].to(FP8)
    return flat.reshape(codes.shape)


def spread_indices(count: int, total: int, seed: int = 0) -> torch.Tensor:
    return torch.randperm(total, generator=torch.Generator().manual_seed(seed))[:count]


@pytest.mark.parametrize("operator", sorted(QUANT_OPERATORS))
def test_the_reference_against_itself_passes_with_no_code_off(operator):
    spec, _, reference = reference_of(operator)
    clone = replaced(reference, QUANT_OPERATORS[operator][2], reference_codes(operator, reference))
    result = compare_outputs(reference, clone, policy=spec.policy, shape_id="1")
    assert result.ok, result.error
    assert result.mismatch_share == 0.0 and result.max_abs_error == 0.0


@pytest.mark.parametrize("operator", sorted(QUANT_OPERATORS))
def test_a_few_codes_one_step_off_pass_and_their_share_is_reported(operator):
    spec, _, reference = reference_of(operator)
    codes = reference_codes(operator, reference)
    total = codes.numel()  # 24,576: 0.1% is 24 codes
    index = spread_indices(20, total)
    candidate_codes = moved(codes, index, 1)
    assert int((grid_position(candidate_codes) - grid_position(codes)).abs().max()) == 1
    candidate = replaced(reference, QUANT_OPERATORS[operator][2], candidate_codes)
    result = compare_outputs(reference, candidate, policy=spec.policy, shape_id="2")
    assert result.ok, result.error
    assert result.mismatch_share == pytest.approx(20 / total)
    assert result.max_abs_error > 0
    # The dequantised error of one step is at most one step at the reference code's
    # magnitude times the scale: at most 32 * max(scale).
    scale = reference[QUANT_OPERATORS[operator][3]]
    assert result.max_abs_error <= 32 * float(scale.max())


@pytest.mark.parametrize("operator", sorted(QUANT_OPERATORS))
def test_too_many_codes_one_step_off_fail(operator):
    spec, _, reference = reference_of(operator)
    codes = reference_codes(operator, reference)
    index = spread_indices(60, codes.numel())  # 0.24%
    candidate = replaced(reference, QUANT_OPERATORS[operator][2], moved(codes, index, 1))
    result = compare_outputs(reference, candidate, policy=spec.policy, shape_id="3")
    assert not result.ok
    assert "60 of 24576 fp8 codes (0.24%) differ" in result.error
    assert "at most 0.10% may" in result.error
    assert result.mismatch_share == pytest.approx(60 / codes.numel())


@pytest.mark.parametrize("operator", sorted(QUANT_OPERATORS))
def test_a_single_code_two_steps_off_fails(operator):
    spec, _, reference = reference_of(operator)
    codes = reference_codes(operator, reference)
    candidate = replaced(
        reference, QUANT_OPERATORS[operator][2], moved(codes, torch.tensor([777]), 2)
    )
    result = compare_outputs(reference, candidate, policy=spec.policy, shape_id="4")
    assert not result.ok
    assert "1 of 24576 fp8 codes are more than 1 step(s) away" in result.error
    assert "2 step(s) apart" in result.error
    row, column = divmod(777, codes.shape[1])
    assert f"worst at ({row}, {column})" in result.error


@pytest.mark.parametrize("operator", sorted(QUANT_OPERATORS))
@pytest.mark.parametrize(
    "make_wrong",
    [
        pytest.param(lambda codes: torch.zeros_like(codes), id="all-zero"),
        pytest.param(
            lambda codes: torch.full_like(codes.float(), float(codes.float().abs().mean())).to(FP8),
            id="constant",
        ),
        pytest.param(lambda codes: (codes.float() * 0.5).to(FP8), id="half"),
        pytest.param(lambda codes: (codes.float() * 1.1).clamp(-448, 448).to(FP8), id="1.1x"),
    ],
)
def test_wrong_codes_fail(operator, make_wrong):
    spec, _, reference = reference_of(operator)
    codes = reference_codes(operator, reference)
    candidate = replaced(reference, QUANT_OPERATORS[operator][2], make_wrong(codes))
    result = compare_outputs(reference, candidate, policy=spec.policy, shape_id="5")
    assert not result.ok
    assert "fp8 codes" in result.error


@pytest.mark.parametrize("operator", sorted(QUANT_OPERATORS))
@pytest.mark.parametrize("factor", [2.0, 1.0001, 0.0])
def test_a_wrong_scale_fails_even_when_the_dequantised_values_agree(operator, factor):
    """Codes halved and the scale doubled dequantise to nearly the same values: still wrong."""
    spec, _, reference = reference_of(operator)
    code_leaf, scale_leaf = QUANT_OPERATORS[operator][2:]
    scale = reference[scale_leaf] * factor
    codes = (reference[code_leaf].float() / factor).nan_to_num(0.0).clamp(-448, 448).to(FP8)
    candidate = replaced(replaced(reference, scale_leaf, scale), code_leaf, codes)
    result = compare_outputs(reference, candidate, policy=spec.policy, shape_id="6")
    assert not result.ok
    assert f"output '{leaf_name(scale_leaf)}'" in result.error


def test_one_scale_of_one_group_wrong_fails():
    spec, _, reference = reference_of("per_token_group_quant_fp8")
    scales = reference["scales"].clone()
    scales[5, 2] *= 1 + 2**-18  # four fp32 ulps: beyond rtol 1e-6
    result = compare_outputs(
        reference, {**reference, "scales": scales}, policy=spec.policy, shape_id="7"
    )
    assert not result.ok and "'scales'" in result.error and "(5, 2)" in result.error


@pytest.mark.parametrize("operator", sorted(QUANT_OPERATORS))
def test_a_nan_code_where_the_reference_has_none_fails(operator):
    spec, _, reference = reference_of(operator)
    code_leaf = QUANT_OPERATORS[operator][2]
    codes = reference_codes(operator, reference)
    assert not bool(codes.float().isnan().any())  # references saturate
    codes.view(torch.uint8).reshape(-1)[100] = 0x7F  # e4m3fn NaN
    result = compare_outputs(
        reference, replaced(reference, code_leaf, codes), policy=spec.policy, shape_id="8"
    )
    assert not result.ok
    assert "NaN where the reference's are not" in result.error
    assert "saturate at +-448" in result.error
    assert result.max_abs_error == float("inf")


def test_nan_where_the_reference_saturates_fails():
    """What an unclamped cast gives on hardware whose conversion does not saturate: NaN
    (e4m3fn has no infinity) where the reference's code is +-448."""
    spec, _, (codes, scale) = reference_of("fp8_dynamic_per_token_quant")
    saturated = codes.float().abs() == 448
    assert int(saturated.sum()) >= codes.shape[0]  # every row's maximum
    unclamped = codes.clone()
    unclamped.view(torch.uint8)[saturated] = 0x7F
    result = compare_outputs((codes, scale), (unclamped, scale), policy=spec.policy, shape_id="9")
    assert not result.ok and "NaN" in result.error


def test_fused_rmsnorm_quant_scale_may_be_one_bf16_step_off_in_one_percent_of_rows():
    spec, _, reference = reference_of("fused_rmsnorm_quant", token_count=200, hidden_size=256)
    codes, scale, residual = reference
    few = scale.clone()
    few[17] *= 1 + 2**-8  # the row's largest |n| one bf16 step up
    passed = compare_outputs(reference, (codes, few, residual), policy=spec.policy, shape_id="a")
    assert passed.ok, passed.error
    assert passed.mismatch_share == pytest.approx(1 / 200)  # the rows not exact to 1e-6
    many = scale.clone()
    many[[3, 50, 99]] *= 1 + 2**-8  # 1.5% of the rows
    failed = compare_outputs(reference, (codes, many, residual), policy=spec.policy, shape_id="a")
    assert not failed.ok and "tighter rule" in failed.error
    far = scale.clone()
    far[17] *= 1 + 2**-6  # beyond one bf16 step
    failed = compare_outputs(reference, (codes, far, residual), policy=spec.policy, shape_id="a")
    assert not failed.ok and "'output[1]'" in failed.error


def test_fused_rmsnorm_quant_residual_out_is_exact():
    spec, _, (codes, scale, residual) = reference_of("fused_rmsnorm_quant")
    off = residual.clone()
    off.view(torch.int16).reshape(-1)[5] += 1  # one bf16 ulp
    result = compare_outputs(
        (codes, scale, residual), (codes, scale, off), policy=spec.policy, shape_id="b"
    )
    assert not result.ok and "'output[2]'" in result.error


def test_fp8_blockscale_fused_moe_allows_two_percent_of_codes_one_step_off():
    policy = get_operator("fp8_blockscale_fused_moe").policy
    generator = torch.Generator().manual_seed(9)
    reference = (torch.randn((64, 256), generator=generator) * 40).clamp(-448, 448).to(FP8)
    total = reference.numel()
    one_percent = moved(reference, spread_indices(total // 100, total), 1)
    result = compare_outputs(reference, one_percent, policy=policy, shape_id="c")
    assert result.ok, result.error
    assert result.mismatch_share == pytest.approx((total // 100) / total)
    three_percent = moved(reference, spread_indices(3 * total // 100, total), 1)
    assert not compare_outputs(reference, three_percent, policy=policy, shape_id="c").ok
    two_steps = moved(reference, torch.tensor([3]), 2)
    assert not compare_outputs(reference, two_steps, policy=policy, shape_id="c").ok
    assert not compare_outputs(
        reference, torch.zeros_like(reference), policy=policy, shape_id="c"
    ).ok


def test_fp8_leaves_get_the_code_rule_by_default():
    """An fp8 output of an operator whose policy names no rule for it is compared as codes."""
    policy = CorrectnessPolicy(rtol=0.5, atol_scale=0.5)
    reference = torch.linspace(-400, 400, 512).to(FP8)
    two_steps = moved(reference, torch.tensor([10]), 2)
    result = compare_outputs(reference, two_steps, policy=policy, shape_id="d")
    assert not result.ok and "e4m3fn grid" in result.error
    assert compare_outputs(reference, reference.clone(), policy=policy, shape_id="d").ok


def test_negative_zero_equals_zero_and_steps_cross_zero():
    reference = torch.tensor([0.0, -0.0, 2.0**-9, -(2.0**-9), 448.0]).to(FP8)
    rule = Fp8CodePolicy(max_step_share=1.0)
    same = torch.tensor([-0.0, 0.0, 2.0**-9, -(2.0**-9), 448.0]).to(FP8)
    result = compare_fp8_codes(reference, same, rule=rule, where="w")
    assert result.ok and result.mismatch_share == 0.0
    # -2**-9 -> 2**-9 crosses zero: two steps.
    crossed = torch.tensor([0.0, 0.0, -(2.0**-9), -(2.0**-9), 416.0]).to(FP8)
    result = compare_fp8_codes(reference, crossed, rule=rule, where="w")
    assert not result.ok and "1 of 5 fp8 codes are more than 1 step(s)" in result.error


def test_chunked_comparison_agrees_with_one_chunk(monkeypatch):
    spec, _, reference = reference_of("per_token_group_quant_fp8")
    codes = reference["quantized"]
    candidate = moved(codes, spread_indices(40, codes.numel(), seed=2), 1)
    scales = reference["scales"].clone()
    scales[7, 1] *= 1 + 2**-22  # a slightly different candidate scale, within rtol 1e-6
    rule = Fp8CodePolicy(max_step_share=0.01, scale_leaf="scales")
    pair = (reference["scales"], scales)
    whole = compare_fp8_codes(codes, candidate, rule=rule, where="w", scales=pair)
    monkeypatch.setattr(correctness, "FP8_CHUNK_ELEMENTS", 3 * 512)
    chunked = compare_fp8_codes(codes, candidate, rule=rule, where="w", scales=pair)
    assert whole.ok and chunked.ok
    assert whole == chunked and whole.max_abs_error > 0
    two = moved(codes, torch.tensor([40 * 512 + 300]), 2)
    failed = compare_fp8_codes(codes, two, rule=rule, where="w", scales=pair)
    assert not failed.ok and "worst at (40, 300)" in failed.error


def _cases_of_identical_chunks():
    """(name, reference codes, candidate codes, scale pair or None): outputs of which some
    or all chunks (of 3 x 512 elements) are the reference's bit for bit."""
    _, _, reference = reference_of("per_token_group_quant_fp8")
    codes, scales = reference["quantized"], reference["scales"]
    nan_codes = codes.clone()
    nan_codes.view(torch.uint8)[5, :7] = 0x7F  # NaN codes, the same on both sides
    inf_scales = scales.clone()
    inf_scales[4, 0] = float("inf")  # the same infinite scale on both sides
    nudged = scales.clone()
    nudged[20, 2] *= 1 + 2**-22  # one scale of one chunk a bit off, within rtol 1e-6
    signed_zero = scales.clone()
    signed_zero[30, 1] = -0.0
    zero = signed_zero.clone()
    zero[30, 1] = 0.0
    return [
        ("all the same", codes, codes.clone(), (scales, scales.clone())),
        ("one chunk a code off", codes, moved(codes, torch.tensor([10 * 512 + 3]), 1),
         (scales, scales.clone())),
        ("one chunk two codes off", codes, moved(codes, torch.tensor([40 * 512 + 1]), 2),
         (scales, scales.clone())),
        ("one scale a bit off", codes, codes.clone(), (scales, nudged)),
        ("NaN codes on both sides", nan_codes, nan_codes.clone(), (scales, scales.clone())),
        ("an infinite scale on both sides", codes, codes.clone(), (inf_scales, inf_scales.clone())),
        ("-0.0 against 0.0", codes, codes.clone(), (signed_zero, zero)),
        ("no scales", codes, moved(codes, torch.tensor([7]), 1), None),
    ]  # fmt: skip


@pytest.mark.parametrize("case", range(8))
def test_identical_chunks_are_skipped_with_the_full_comparisons_result(monkeypatch, case):
    name, codes, candidate, pair = _cases_of_identical_chunks()[case]
    rule = Fp8CodePolicy(max_step_share=0.01, scale_leaf="scales" if pair else None)
    monkeypatch.setattr(correctness, "FP8_CHUNK_ELEMENTS", 3 * 512)
    # Each chunk compared in full (no chunk skipped) against chunks skipped where same.
    real = correctness._same_codes_and_scales
    monkeypatch.setattr(correctness, "_same_codes_and_scales", lambda *a: False)
    full = compare_fp8_codes(codes, candidate, rule=rule, where="w", scales=pair)
    monkeypatch.setattr(correctness, "_same_codes_and_scales", real)
    graded = []
    real_grid = correctness._fp8_grid
    monkeypatch.setattr(correctness, "_fp8_grid", lambda c: graded.append(1) or real_grid(c))
    skipping = compare_fp8_codes(codes, candidate, rule=rule, where="w", scales=pair)
    assert skipping == full, name
    chunks = -(-codes.shape[0] // 3)
    assert len(graded) < 2 * chunks, f"{name}: no chunk was skipped"


def test_a_chunk_with_the_same_codes_but_another_scale_is_compared_in_full():
    _, _, reference = reference_of("per_token_group_quant_fp8")
    codes, scales = reference["quantized"], reference["scales"]
    off = scales.clone()
    off[2, 0] *= 2  # the codes unchanged, so the dequantised values are twice the reference's
    rule = Fp8CodePolicy(max_step_share=0.01, scale_leaf="scales")
    result = compare_fp8_codes(codes, codes.clone(), rule=rule, where="w", scales=(scales, off))
    block = codes[2, :128].float() * scales[2, 0]
    assert result.ok and result.mismatch_share == 0.0  # the codes rule alone passes it
    assert result.max_abs_error == pytest.approx(float(block.abs().max()))


def test_check_shape_reports_the_share_of_codes_one_step_off():
    spec = get_operator("fp8_dynamic_per_token_quant")
    reference = spec.build_reference({})

    def one_code_off(x):
        codes, scale = reference(x=x)
        return moved(codes, torch.tensor([0]), 1), scale

    result = check_shape(
        spec=spec,
        reference=reference,
        candidate=one_code_off,
        shape_id="e",
        input_kwargs={"token_count": 8, "hidden_size": 256},
        device=CPU,
        run_seed=1,
    )
    assert result.ok, result.error
    assert result.mismatch_share == pytest.approx(1 / (8 * 256))


TRITON_SHAPES = [
    ("fp8_dynamic_per_token_quant", {}, {"token_count": 20, "hidden_size": 7168}),
    ("fp8_dynamic_per_token_quant", {}, {"token_count": 3, "hidden_size": 300}),
    ("per_token_group_quant_fp8", {"group_size": 128}, {"token_count": 33, "hidden_size": 2048}),
    ("per_token_group_quant_fp8", {"group_size": 64}, {"token_count": 5, "hidden_size": 192}),
    ("fused_rmsnorm_quant", {}, {"token_count": 24, "hidden_size": 4096}),
    ("fused_rmsnorm_quant", {}, {"token_count": 7, "hidden_size": 200}),
]


@pytest.mark.parametrize(
    ("operator", "init_kwargs", "input_kwargs"),
    TRITON_SHAPES,
    ids=[f"{op}-{i}" for i, (op, _, _) in enumerate(TRITON_SHAPES)],
)
def test_the_triton_baseline_kernels_pass_in_the_interpreter(operator, init_kwargs, input_kwargs):
    import importlib.util

    module_spec = importlib.util.spec_from_file_location(
        f"fp8_baseline_{operator}", TRITON_BASELINE / f"{operator}.py"
    )
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    spec = get_operator(operator)
    inputs = spec.make_inputs(device=CPU, seed=20261130, **input_kwargs)
    reference = spec.build_reference(init_kwargs)(**{k: v.clone() for k, v in inputs.items()})
    candidate = module.Model(**init_kwargs)(**inputs)
    result = compare_outputs(reference, candidate, policy=spec.policy, shape_id="triton")
    assert result.ok, result.error
    assert result.mismatch_share <= 1e-3


def test_the_shape_result_carries_the_share_of_codes_one_step_off():
    from evaluator.hardware import get_profile
    from evaluator.results import SHAPE_FIELDS, shape_entry
    from evaluator.suite import ShapeSpec

    shape = ShapeSpec(
        operator="fp8_dynamic_per_token_quant",
        shape_id="0",
        init_kwargs={},
        input_kwargs={"token_count": 8, "hidden_size": 256},
        weight=1.0,
        w_flops={"fp8_e4m3": 8 * 257},
        q_read=4096,
        q_write=2080,
    )
    entry = shape_entry(
        shape,
        status="pass",
        measurement={"time_s": 1e-3, "max_abs_error": 0.01, "mismatch_share": 1 / 2048},
        hardware=get_profile("cpu-dev"),
        threshold_own_share=0.0,
    )
    assert list(entry) == list(SHAPE_FIELDS)
    assert entry["mismatch_share"] == 1 / 2048
    assert (
        shape_entry(
            shape, status="missing", hardware=get_profile("cpu-dev"), threshold_own_share=0.0
        )["mismatch_share"]
        is None
    )
