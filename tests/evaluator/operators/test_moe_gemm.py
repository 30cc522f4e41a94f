"""The MoE and GEMM operators (group ``moe_gemm``): W/Q against the release, references on
small CPU shapes, independent hand checks of the semantics, and the input generators."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
import torch
from torch.nn import functional

from evaluator.operators import (
    block_scaled_mm,
    fp8_blockscale_fused_moe,
    fused_moe,
    linear_sigmoid_mul,
    moe_align_block_size,
    moe_count_and_sort,
    moe_topk_gating_softmax,
    topk_filter,
)
from evaluator.operators._moe_gemm import FP8_DTYPE
from tests.release import require_release

CPU = torch.device("cpu")
MODULES: dict[str, ModuleType] = {
    module.SPEC.slug: module
    for module in (
        block_scaled_mm,
        fp8_blockscale_fused_moe,
        fused_moe,
        linear_sigmoid_mul,
        moe_align_block_size,
        moe_count_and_sort,
        moe_topk_gating_softmax,
        topk_filter,
    )
}

# Draw-dependent W/Q use the recorded draws of the published shapes: no exceptions left.
EXPECTED_WORK_EXCEPTIONS: dict[str, set[str]] = {}


def _release(op: str) -> tuple[dict[str, Any], dict[str, Any]]:
    data_dir = require_release()
    shapes = json.loads((data_dir / op / "shapes.json").read_text())
    roofline = json.loads((data_dir / op / "roofline.json").read_text())["shapes"]
    return shapes, roofline


def _off_by(work: Any, stored: dict[str, Any]) -> float:
    """Largest relative difference of W (per key), Q_read and Q_write from the stored ones."""
    assert set(work.w_flops) == set(stored["semantic_W_flops"])
    pairs = [(work.w_flops[key], stored["semantic_W_flops"][key]) for key in work.w_flops]
    pairs += [
        (work.q_read, stored["semantic_Q_read_bytes"]),
        (work.q_write, stored["semantic_Q_write_bytes"]),
    ]
    return max(abs(ours - theirs) / max(abs(theirs), 1) for ours, theirs in pairs)


# ---------------------------------------------------------------- W/Q against the release


@pytest.mark.parametrize("op", sorted(MODULES))
def test_work_matches_published_figures_within_one_percent(op: str) -> None:
    shapes, roofline = _release(op)
    spec = MODULES[op].SPEC
    assert set(shapes) == set(roofline)
    off = {
        sid: _off_by(spec.work(shape["init_kwargs"], shape["input_kwargs"]), roofline[sid])
        for sid, shape in shapes.items()
    }
    misses = {sid for sid, share in off.items() if share > 0.01}
    assert misses == EXPECTED_WORK_EXCEPTIONS.get(op, set()), off
    assert set(getattr(MODULES[op], "WORK_EXCEPTIONS", ())) == misses


def test_fused_moe_work_is_exact_with_the_published_draw() -> None:
    shapes, roofline = _release("fused_moe")
    for sid, shape in shapes.items():
        kwargs = shape["input_kwargs"]
        used = 8 if sid == "8" else kwargs["num_experts"]
        work = fused_moe.work(
            shape["init_kwargs"],
            kwargs,
            pairs=fused_moe.PUBLISHED_PAIRS[int(sid)],
            distinct_experts=used,
        )
        assert _off_by(work, roofline[sid]) == 0, sid


def test_fp8_moe_and_align_work_are_exact_with_the_published_draw() -> None:
    shapes, roofline = _release("fp8_blockscale_fused_moe")
    used = {"0": 128, "1": 256, "2": 8, "3": 164, "4": 8, "5": 128}
    for sid, shape in shapes.items():
        work = fp8_blockscale_fused_moe.work(
            shape["init_kwargs"], shape["input_kwargs"], distinct_experts=used[sid]
        )
        assert _off_by(work, roofline[sid]) == 0, sid
    shapes, roofline = _release("moe_align_block_size")
    blocks = {"0": 8, "2": 128, "3": 128, "4": 186, "5": 292, "6": 573}
    for sid, shape in shapes.items():
        work = moe_align_block_size.work(
            shape["init_kwargs"], shape["input_kwargs"], num_blocks=blocks[sid]
        )
        assert _off_by(work, roofline[sid]) == 0, sid


def test_expected_blocks_matches_a_simulation() -> None:
    generator = torch.Generator().manual_seed(5)
    ids = torch.randint(0, 16, (400, 40 * 8), generator=generator)
    counts = torch.stack([torch.bincount(row, minlength=16) for row in ids])
    simulated = float(((counts + 7) // 8).sum(dim=1).double().mean())
    assert moe_align_block_size.expected_blocks(40 * 8, 16, 8) == pytest.approx(simulated, rel=0.01)


# ------------------------------------------------------- references on small CPU shapes

SMALL_CASES: list[tuple[str, dict[str, Any] | None, dict[str, Any]]] = [
    (
        "block_scaled_mm",
        {"group_n": 128, "group_k": 128},
        {"m": 37, "n": 256, "k": 384, "group_n": 128, "group_k": 128},
    ),
    (
        "fused_moe",
        {"num_experts": 8, "intermediate_size": 96, "top_k": 2},
        {
            "token_count": 21,
            "hidden_size": 80,
            "intermediate_size": 96,
            "num_experts": 8,
            "top_k": 2,
        },
    ),
    (
        "fused_moe",
        {"num_experts": 16, "intermediate_size": 48, "top_k": 8},
        {
            "token_count": 9,
            "hidden_size": 64,
            "intermediate_size": 48,
            "num_experts": 16,
            "top_k": 8,
        },
    ),
    (
        "fp8_blockscale_fused_moe",
        {"num_experts": 8, "intermediate_size": 256, "top_k": 3},
        {
            "token_count": 5,
            "hidden_size": 384,
            "intermediate_size": 256,
            "num_experts": 8,
            "top_k": 3,
        },
    ),
    (
        "moe_align_block_size",
        {"block_size": 16, "num_experts": 8},
        {"token_count": 19, "top_k": 4, "num_experts": 8},
    ),
    ("moe_count_and_sort", None, {"token_count": 7, "top_k": 8, "num_experts": 128}),
    ("moe_topk_gating_softmax", {"top_k": 8}, {"token_count": 13, "num_experts": 128}),
    (
        "moe_topk_gating_softmax",
        {"top_k": 4, "num_expert_groups": 4, "topk_group": 2},
        {"token_count": 13, "num_experts": 32},
    ),
    ("linear_sigmoid_mul", None, {"token_count": 5, "hidden_size": 96, "out_features": 40}),
    ("topk_filter", {}, {"seq_len": 4, "hidden_size": 301}),
    ("topk_filter", {"top_k": 50}, {"seq_len": 2, "hidden_size": 30}),
]

EXPECTED_STRUCTURE: dict[
    str, Callable[[dict[str, Any]], dict[str, tuple[tuple[int, ...], torch.dtype]] | None]
]
EXPECTED_STRUCTURE = {
    "block_scaled_mm": lambda kw: {"out": ((kw["m"], kw["n"]), torch.float32)},
    "fused_moe": lambda kw: {"out": ((kw["token_count"], kw["hidden_size"]), torch.float32)},
    "fp8_blockscale_fused_moe": lambda kw: {
        "out": ((kw["token_count"], kw["hidden_size"]), FP8_DTYPE)
    },
    "moe_align_block_size": lambda kw: None,  # data-dependent lengths, checked below
    "moe_count_and_sort": lambda kw: {
        "sorted_token_ids": ((kw["token_count"] * kw["top_k"],), torch.int32),
        "expert_token_counts": ((kw["num_experts"],), torch.int32),
        "cumsum": ((kw["num_experts"] + 1,), torch.int32),
    },
    "moe_topk_gating_softmax": lambda kw: None,  # needs top_k from init, checked below
    "linear_sigmoid_mul": lambda kw: {
        "out": ((kw["token_count"], kw["out_features"]), torch.bfloat16)
    },
    "topk_filter": lambda kw: {"out": ((kw["seq_len"], kw["hidden_size"]), torch.float32)},
}


def _as_dict(output: Any) -> dict[str, torch.Tensor]:
    return output if isinstance(output, dict) else {"out": output}


@pytest.mark.parametrize(("op", "init_kwargs", "input_kwargs"), SMALL_CASES)
def test_reference_runs_on_small_cpu_shapes(
    op: str, init_kwargs: dict[str, Any] | None, input_kwargs: dict[str, Any]
) -> None:
    spec = MODULES[op].SPEC
    inputs = spec.make_inputs(device=CPU, seed=11, **input_kwargs)
    again = spec.make_inputs(device=CPU, seed=11, **input_kwargs)
    other = spec.make_inputs(device=CPU, seed=12, **input_kwargs)
    assert all(torch.equal(inputs[name].float(), again[name].float()) for name in inputs)
    assert not all(torch.equal(inputs[name].float(), other[name].float()) for name in inputs)
    kept = {name: tensor.clone() for name, tensor in inputs.items()}
    model = spec.build_reference(init_kwargs)
    first = _as_dict(model(**inputs))
    second = _as_dict(model(**inputs))
    for name, tensor in inputs.items():  # inputs untouched (bitwise, fp8 viewed as bytes)
        assert torch.equal(
            tensor.view(torch.uint8) if tensor.dtype == FP8_DTYPE else tensor,
            kept[name].view(torch.uint8) if tensor.dtype == FP8_DTYPE else kept[name],
        ), name
    assert set(first) == set(spec.output_names)
    for name, tensor in first.items():  # deterministic, no NaN, no aliasing of inputs
        assert type(tensor) is torch.Tensor
        assert torch.equal(tensor.float(), second[name].float()), name
        assert not torch.isnan(tensor.float()).any(), name
        assert all(
            tensor.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
            for x in inputs.values()
        )
    expected = EXPECTED_STRUCTURE[op](input_kwargs)
    if expected is not None:
        assert {n: (tuple(t.shape), t.dtype) for n, t in first.items()} == expected
    if op == "moe_topk_gating_softmax":
        rows, k = input_kwargs["token_count"], init_kwargs["top_k"]
        assert {n: (tuple(t.shape), t.dtype) for n, t in first.items()} == {
            "topk_weights": ((rows, k), torch.float32),
            "topk_ids": ((rows, k), torch.int32),
        }
    if op == "moe_align_block_size":
        blocks = first["expert_ids"].numel()
        assert first["sorted_token_ids"].shape == (blocks * init_kwargs["block_size"],)
        assert first["num_tokens_post_pad"].tolist() == [first["sorted_token_ids"].numel()]
        assert all(t.dtype == torch.int32 for t in first.values())


def test_cheap_published_shapes_run_on_cpu() -> None:
    cheap = {
        "topk_filter": ["0", "3", "7"],
        "moe_topk_gating_softmax": ["0", "1", "3"],
        "moe_count_and_sort": ["0", "1", "2", "3", "4"],
        "moe_align_block_size": ["0", "2", "3", "4", "5", "6"],
        "linear_sigmoid_mul": ["5", "7"],
        "block_scaled_mm": ["0"],
    }
    for op, ids in cheap.items():
        shapes, _ = _release(op)
        spec = MODULES[op].SPEC
        for sid in ids:
            shape = shapes[sid]
            inputs = spec.make_inputs(device=CPU, seed=0, **shape["input_kwargs"])
            output = _as_dict(spec.build_reference(shape["init_kwargs"])(**inputs))
            assert set(output) == set(spec.output_names), (op, sid)


# --------------------------------------------------------- independent hand checks


def _random_fp8(shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    return (torch.randn(shape, generator=generator) * 60).clamp(-448, 448).to(FP8_DTYPE)


def test_block_scaled_mm_matches_float64_loops_with_distinct_block_scales() -> None:
    generator = torch.Generator().manual_seed(3)
    m, n, k, group_n, group_k = 3, 4, 6, 2, 2
    a, b = _random_fp8((m, k), generator), _random_fp8((n, k), generator)
    a_scales = torch.rand((m, k // group_k), generator=generator) + 0.5
    b_scales = torch.tensor([[1.0, 10.0, 100.0], [1000.0, 1e4, 1e5]])  # one per block
    out = block_scaled_mm.Model(group_n, group_k)(a=a, b=b, a_scales=a_scales, b_scales=b_scales)
    af, bf = a.double().tolist(), b.double().tolist()
    for i in range(m):
        for j in range(n):
            expected = 0.0
            for kappa in range(k // group_k):
                partial = sum(
                    af[i][t] * bf[j][t] for t in range(kappa * group_k, (kappa + 1) * group_k)
                )
                expected += (
                    partial * float(a_scales[i, kappa]) * float(b_scales[j // group_n, kappa])
                )
            assert float(out[i, j]) == pytest.approx(expected, rel=1e-6, abs=1e-6), (i, j)


def test_block_scaled_mm_inputs_follow_the_documented_quantisation_and_chunks() -> None:
    n, k, group = 256, 256, 128
    m = block_scaled_mm.DRAW_CHUNK_ROWS + 3
    inputs = block_scaled_mm.make_inputs(
        device=CPU,
        generator=torch.Generator().manual_seed(7),
        m=m,
        n=n,
        k=k,
        group_n=group,
        group_k=group,
    )
    assert inputs["a"].dtype == inputs["b"].dtype == FP8_DTYPE
    assert inputs["a_scales"].shape == (m, 2) and inputs["b_scales"].shape == (2, 2)
    generator = torch.Generator().manual_seed(7)
    b_raw = torch.randn((n, k), generator=generator)
    first = torch.randn((block_scaled_mm.DRAW_CHUNK_ROWS, k), generator=generator)
    tail = torch.randn((3, k), generator=generator)
    blocks = b_raw.reshape(2, group, 2, group)
    signed_max = blocks.amax(dim=(1, 3))
    assert torch.equal(inputs["b_scales"], (signed_max / 448.0).clamp_min(1e-10))
    b_codes = inputs["b"].float().reshape(2, group, 2, group)
    assert torch.equal(b_codes.amax(dim=(1, 3)), torch.full((2, 2), 448.0))  # signed max
    assert bool((b_codes == -448.0).any())  # blocks whose minimum outweighs the maximum
    for rows, raw in ((slice(0, 5), first[:5]), (slice(m - 3, m), tail)):
        scale = (raw.reshape(-1, 2, group).abs().amax(-1) / 448.0).clamp_min(1e-10)
        assert torch.equal(inputs["a_scales"][rows], scale)
        codes = (raw.reshape(-1, 2, group) / scale[..., None]).clamp(-448, 448)
        assert torch.equal(inputs["a"][rows].float(), codes.to(FP8_DTYPE).float().reshape(-1, k))
    assert torch.equal(
        inputs["a"][:, :].float().abs().reshape(m, 2, group).amax(-1), torch.full((m, 2), 448.0)
    )


def _ffn64(x: list[float], w1: torch.Tensor, w2: torch.Tensor, inter: int) -> list[float]:
    z = [sum(x[c] * float(w1[r, c]) for c in range(len(x))) for r in range(2 * inter)]
    act = [z[i] / (1 + math.exp(-z[i])) * z[inter + i] for i in range(inter)]
    return [sum(act[i] * float(w2[d, i]) for i in range(inter)) for d in range(w2.shape[0])]


def test_fused_moe_matches_per_slot_float64_loops() -> None:
    tokens, hidden, inter, experts = 4, 6, 3, 3
    inputs = fused_moe.make_inputs(
        device=CPU,
        generator=torch.Generator().manual_seed(2),
        token_count=tokens,
        hidden_size=hidden,
        intermediate_size=inter,
        num_experts=experts,
        top_k=2,
    )
    inputs["topk_ids"] = torch.tensor([[0, 2], [1, 1], [2, 0], [2, 2]], dtype=torch.int32)
    out = fused_moe.Model(experts, inter, 2)(**inputs)
    for t in range(tokens):
        x = inputs["hidden_states"][t].double().tolist()
        expected = [0.0] * hidden
        for s in range(2):  # slots separately: the same FFN as merging duplicates
            e = int(inputs["topk_ids"][t, s])
            y = _ffn64(x, inputs["w1"][e].double(), inputs["w2"][e].double(), inter)
            weight = float(inputs["topk_weights"][t, s])
            expected = [acc + weight * v for acc, v in zip(expected, y, strict=True)]
        assert out[t].tolist() == pytest.approx(expected, rel=1e-5, abs=1e-9), t


def test_fused_moe_merges_duplicates_and_uses_true_fp32() -> None:
    inputs = fused_moe.make_inputs(
        device=CPU,
        generator=torch.Generator().manual_seed(4),
        token_count=2,
        hidden_size=16,
        intermediate_size=8,
        num_experts=4,
        top_k=2,
    )
    inputs["topk_ids"] = torch.tensor([[3, 3], [1, 2]], dtype=torch.int32)
    inputs["topk_weights"] = torch.tensor([[0.25, 0.75], [0.5, 0.5]])
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("medium")
    try:
        out = fused_moe.Model(4, 8, 2)(**inputs)
        assert torch.get_float32_matmul_precision() == "medium"  # restored afterwards
    finally:
        torch.set_float32_matmul_precision(previous)
    x = inputs["hidden_states"][:1].float()
    z = x @ inputs["w1"][3].float().T
    y = (functional.silu(z[:, :8]) * z[:, 8:]) @ inputs["w2"][3].float().T
    assert torch.allclose(out[:1], y, rtol=1e-6, atol=0)  # weight 0.25 + 0.75 = 1 exactly


def test_fused_moe_inputs_have_documented_scales_and_draw_order() -> None:
    kwargs = {
        "token_count": 600,
        "hidden_size": 64,
        "intermediate_size": 32,
        "num_experts": 8,
        "top_k": 2,
    }
    inputs = fused_moe.make_inputs(device=CPU, generator=torch.Generator().manual_seed(9), **kwargs)
    generator = torch.Generator().manual_seed(9)
    hidden = torch.randn((600, 64), dtype=torch.bfloat16, generator=generator) * 0.1
    w1 = torch.randn((8, 64, 64), dtype=torch.bfloat16, generator=generator) * 64**-0.5
    w2 = torch.randn((8, 64, 32), dtype=torch.bfloat16, generator=generator) * 32**-0.5
    weights = torch.softmax(torch.randn((600, 2), generator=generator), dim=-1)
    ids = torch.randint(0, 8, (600, 2), generator=generator)
    for name, tensor in (
        ("hidden_states", hidden),
        ("w1", w1),
        ("w2", w2),
        ("topk_weights", weights),
    ):
        assert torch.equal(inputs[name], tensor), name
    assert inputs["topk_ids"].dtype == torch.int32 and torch.equal(inputs["topk_ids"].long(), ids)
    assert float(inputs["hidden_states"].float().std()) == pytest.approx(0.1, rel=0.05)
    assert float(inputs["w2"].float().std()) == pytest.approx(32**-0.5, rel=0.05)
    assert torch.allclose(inputs["topk_weights"].sum(-1), torch.ones(600))
    duplicated = float((inputs["topk_ids"][:, 0] == inputs["topk_ids"][:, 1]).float().mean())
    assert 0.07 < duplicated < 0.18  # 1/8 of the tokens: duplicates are not removed


def _fp8_case(generator: torch.Generator) -> dict[str, torch.Tensor]:
    tokens, hidden, inter, experts, top_k = 3, 4, 2, 4, 2  # bk = 2 (along H), bn = 1
    return {
        "hidden_states": _random_fp8((tokens, hidden), generator),
        "w1": _random_fp8((experts, 2 * inter, hidden), generator),
        "w2": _random_fp8((experts, hidden, inter), generator),
        "topk_weights": torch.softmax(torch.randn((tokens, top_k), generator=generator), -1),
        "topk_ids": torch.tensor([[0, 2], [2, 1], [1, 0]], dtype=torch.int32),
        "a_scale": torch.rand((tokens, hidden // 2), generator=generator) * 0.03 + 0.02,
        "fc1_scale": torch.rand((experts, 2 * inter, 2), generator=generator) * 0.02 + 0.01,
        "fc2_scale": torch.rand((experts, 2, inter), generator=generator) * 0.05 + 0.05,
    }


def _fp8_moe_float64(case: dict[str, torch.Tensor]) -> list[list[float]]:
    tokens, hidden = case["hidden_states"].shape
    inter = case["w1"].shape[1] // 2
    result = []
    for t in range(tokens):
        x = [
            float(case["hidden_states"][t, c]) * float(case["a_scale"][t, c // 2])
            for c in range(hidden)
        ]
        total = [0.0] * hidden
        for s in range(case["topk_ids"].shape[1]):
            e = int(case["topk_ids"][t, s])
            w1 = torch.tensor(
                [
                    [
                        float(case["w1"][e, r, c]) * float(case["fc1_scale"][e, r, c // 2])
                        for c in range(hidden)
                    ]
                    for r in range(2 * inter)
                ]
            )
            w2 = torch.tensor(
                [
                    [
                        float(case["w2"][e, d, i]) * float(case["fc2_scale"][e, d // 2, i])
                        for i in range(inter)
                    ]
                    for d in range(hidden)
                ]
            )
            y = _ffn64(x, w1.double(), w2.double(), inter)
            total = [
                acc + float(case["topk_weights"][t, s]) * v for acc, v in zip(total, y, strict=True)
            ]
        result.append(total)
    return result


def test_fp8_moe_output_is_the_nearest_e4m3fn_code_of_the_float64_result() -> None:
    case = _fp8_case(torch.Generator().manual_seed(8))
    out = fp8_blockscale_fused_moe.Model(4, 2, 2, scale_block_n=1, scale_block_k=2)(**case)
    assert out.dtype == FP8_DTYPE
    exact = torch.tensor(_fp8_moe_float64(case), dtype=torch.float64)
    assert 1.0 < float(exact.abs().max()) < 448  # non-trivial values inside the fp8 range
    nearest = exact.clamp(-448, 448).float().to(FP8_DTYPE).double()
    got = out.double()
    # The reference's code is the nearest one (up to fp32 noise right at a midpoint).
    assert torch.all((got - exact).abs() <= (nearest - exact).abs() + 1e-4 * exact.abs())


def test_fp8_moe_saturates_at_448_and_ignores_unused_experts() -> None:
    case = _fp8_case(torch.Generator().manual_seed(8))
    case["a_scale"] = case["a_scale"] * 10  # outputs far beyond the fp8 range
    case["w1"][3] = torch.full_like(case["w1"][3], float("nan"))  # expert 3 is never routed
    out = fp8_blockscale_fused_moe.Model(4, 2, 2, scale_block_n=1, scale_block_k=2)(**case)
    exact = torch.tensor(_fp8_moe_float64(case))
    assert float(exact.abs().max()) > 464  # an unclamped cast would give NaN
    assert not torch.isnan(out.float()).any()
    big = exact.abs() > 448
    assert torch.equal(out.float()[big], 448.0 * exact[big].sign())


def test_fp8_moe_inputs_follow_the_documented_draws() -> None:
    kwargs = {
        "token_count": 6,
        "hidden_size": 256,
        "intermediate_size": 128,
        "num_experts": 8,
        "top_k": 3,
    }
    inputs = fp8_blockscale_fused_moe.make_inputs(
        device=CPU, generator=torch.Generator().manual_seed(21), **kwargs
    )
    generator = torch.Generator().manual_seed(21)
    x = (torch.randn((6, 256), dtype=torch.bfloat16, generator=generator) * 0.03).float()
    w1 = torch.randn((8, 256, 256), dtype=torch.bfloat16, generator=generator).float()
    torch.randn((8, 256, 128), dtype=torch.bfloat16, generator=generator)
    scores = torch.rand((6, 8), generator=generator)
    weights = torch.softmax(torch.randn((6, 3), generator=generator), -1)
    a_scale = x.reshape(6, 2, 128).abs().amax(-1).clamp_min(1e-12) / 448.0
    assert torch.equal(inputs["a_scale"], a_scale)
    assert torch.equal(
        inputs["hidden_states"].float(),
        (x.reshape(6, 2, 128) / a_scale[..., None]).to(FP8_DTYPE).float().reshape(6, 256),
    )
    fc1 = w1.reshape(8, 2, 128, 2, 128).abs().amax(dim=(2, 4)).clamp_min(1e-12) / 448.0
    assert torch.equal(inputs["fc1_scale"], fc1)
    assert inputs["fc2_scale"].shape == (8, 2, 1)
    codes = inputs["w2"].float().abs().reshape(8, 2, 128, 1, 128).amax(dim=(2, 4))
    assert torch.equal(codes, torch.full((8, 2, 1), 448.0))
    assert torch.equal(inputs["topk_ids"].long(), torch.topk(scores, 3, dim=-1).indices)
    assert inputs["topk_ids"].dtype == torch.int32
    assert all(len(set(row)) == 3 for row in inputs["topk_ids"].tolist())
    assert torch.equal(inputs["topk_weights"], weights)
    assert {name: t.dtype for name, t in inputs.items()} == {
        "hidden_states": FP8_DTYPE,
        "w1": FP8_DTYPE,
        "w2": FP8_DTYPE,
        "topk_weights": torch.float32,
        "topk_ids": torch.int32,
        "a_scale": torch.float32,
        "fc1_scale": torch.float32,
        "fc2_scale": torch.float32,
    }


def test_moe_align_block_size_on_a_hand_example() -> None:
    ids = torch.tensor([[0, 2], [2, 2], [5, 0]], dtype=torch.int32)
    out = moe_align_block_size.Model(block_size=4, num_experts=6)(topk_ids=ids)
    assert out["sorted_token_ids"].tolist() == [0, 5, 6, 6, 1, 2, 3, 6, 4, 6, 6, 6]
    assert out["expert_ids"].tolist() == [0, 2, 5]
    assert out["num_tokens_post_pad"].tolist() == [12]
    ids = torch.tensor([[1, 1, 1, 1, 1]], dtype=torch.int32)  # a full block, then a partial
    out = moe_align_block_size.Model(block_size=4, num_experts=3)(topk_ids=ids)
    assert out["sorted_token_ids"].tolist() == [0, 1, 2, 3, 4, 5, 5, 5]
    assert out["expert_ids"].tolist() == [1, 1]


def test_moe_align_block_size_matches_a_python_loop() -> None:
    generator = torch.Generator().manual_seed(1)
    inputs = moe_align_block_size.make_inputs(
        device=CPU, generator=generator, token_count=37, top_k=8, num_experts=16
    )
    flat = inputs["topk_ids"].reshape(-1).tolist()
    sorted_ids, expert_ids = [], []
    for e in range(16):
        group = [p for p, f in enumerate(flat) if f == e]
        if group:
            blocks = -(-len(group) // 8)
            sorted_ids += group + [len(flat)] * (blocks * 8 - len(group))
            expert_ids += [e] * blocks
    out = moe_align_block_size.Model(block_size=8, num_experts=16)(**inputs)
    assert out["sorted_token_ids"].tolist() == sorted_ids
    assert out["expert_ids"].tolist() == expert_ids
    assert out["num_tokens_post_pad"].tolist() == [len(sorted_ids)]


def test_moe_count_and_sort_on_a_hand_example_and_a_python_loop() -> None:
    ids = torch.tensor([[0, 2], [2, 2], [5, 0]], dtype=torch.int32)
    out = moe_count_and_sort.Model(num_experts=6)(topk_ids=ids)
    assert out["sorted_token_ids"].tolist() == [0, 5, 1, 2, 3, 4]
    assert out["expert_token_counts"].tolist() == [2, 0, 3, 0, 0, 1]
    assert out["cumsum"].tolist() == [0, 2, 2, 5, 5, 5, 6]
    inputs = moe_count_and_sort.make_inputs(
        device=CPU,
        generator=torch.Generator().manual_seed(3),
        token_count=50,
        top_k=8,
        num_experts=128,
    )
    flat = inputs["topk_ids"].reshape(-1).tolist()
    out = moe_count_and_sort.Model()(**inputs)
    assert out["sorted_token_ids"].tolist() == [
        p for e in range(128) for p, f in enumerate(flat) if f == e
    ]
    counts = [flat.count(e) for e in range(128)]
    assert out["expert_token_counts"].tolist() == counts
    assert out["cumsum"].tolist() == [sum(counts[:e]) for e in range(129)]
    assert torch.equal(
        inputs["topk_ids"].long(),
        torch.randint(0, 128, (50, 8), generator=torch.Generator().manual_seed(3)),
    )


def test_moe_topk_gating_softmax_on_hand_examples() -> None:
    logits = torch.tensor([[0.0, 3.0, 1.0, -2.0, 2.0, 0.5, -1.0, 2.5]])
    out = moe_topk_gating_softmax.Model(top_k=3)(gating_output=logits)
    denominator = sum(math.exp(v) for v in logits[0].tolist())
    assert out["topk_ids"].tolist() == [[1, 7, 4]]
    assert out["topk_weights"][0].tolist() == pytest.approx(
        [math.exp(3.0) / denominator, math.exp(2.5) / denominator, math.exp(2.0) / denominator],
        rel=1e-6,
    )  # the softmax probabilities, not renormalised over the selected three
    # 4 groups of 2; the two best groups (by their max) are {0,1} and {6,7}: expert 4 (2.0)
    # is dropped although it beats expert 6 (-1.0) and expert 0 (0.0).
    grouped = moe_topk_gating_softmax.Model(top_k=4, num_expert_groups=4, topk_group=2)
    out = grouped(gating_output=logits)
    assert out["topk_ids"].tolist() == [[1, 7, 0, 6]]
    assert out["topk_weights"][0, 3].item() == pytest.approx(math.exp(-1.0) / denominator, rel=1e-6)
    inputs = moe_topk_gating_softmax.make_inputs(
        device=CPU, generator=torch.Generator().manual_seed(6), token_count=3, num_experts=16
    )
    assert torch.equal(
        inputs["gating_output"], torch.randn((3, 16), generator=torch.Generator().manual_seed(6))
    )


def test_linear_sigmoid_mul_matches_float64_with_the_gate_rounded_to_bf16() -> None:
    kwargs = {"token_count": 40, "hidden_size": 32, "out_features": 50}
    inputs = linear_sigmoid_mul.make_inputs(
        device=CPU, generator=torch.Generator().manual_seed(4), **kwargs
    )
    inputs["bias"] = inputs["bias"] * 100  # gates ~ +-2, where the bf16 rounding shows
    out = linear_sigmoid_mul.Model()(**inputs).double()
    gate = inputs["hidden_states"].double() @ inputs["weight"].double().T + inputs["bias"].double()
    post = inputs["post_mul_mat"].double()

    def rounded(g: torch.Tensor) -> torch.Tensor:
        return (torch.sigmoid(g) * post).float().to(torch.bfloat16).double()

    expected = rounded(gate.float().to(torch.bfloat16).double())
    unrounded_gate = rounded(gate)
    ulp = 2.0 ** (torch.floor(torch.log2(expected.abs())) - 7)
    assert torch.all((out - expected).abs() <= ulp)
    # Exact except at rare output-rounding ties; keeping the gate in fp32 would move ~10%.
    assert float((out != expected).double().mean()) <= 0.005
    assert float((out != unrounded_gate).double().mean()) >= 0.02
    generator = torch.Generator().manual_seed(4)
    hidden = torch.randn((40, 32), dtype=torch.bfloat16, generator=generator) * 0.02
    weight = torch.randn((50, 32), dtype=torch.bfloat16, generator=generator) * 32**-0.5
    bias = torch.randn((50,), dtype=torch.bfloat16, generator=generator) * 0.02
    post_mul_mat = torch.randn((40, 50), dtype=torch.bfloat16, generator=generator) * 0.02
    assert torch.equal(inputs["hidden_states"], hidden)
    assert torch.equal(inputs["weight"], weight)
    assert torch.equal(inputs["bias"], bias * 100)
    assert torch.equal(inputs["post_mul_mat"], post_mul_mat)
    assert float(weight.float().std()) == pytest.approx(32**-0.5, rel=0.1)


def test_topk_filter_keeps_ties_and_masks_the_rest() -> None:
    logits = torch.tensor([[1.0, 3.0, 3.0, 2.0], [0.5, -1.0, 0.5, 0.5]])
    inf = float("-inf")
    assert topk_filter.Model(top_k=2)(logits=logits).tolist() == [
        [inf, 3.0, 3.0, inf],
        [0.5, inf, 0.5, 0.5],
    ]
    assert topk_filter.Model(top_k=3)(logits=logits).tolist() == [
        [inf, 3.0, 3.0, 2.0],
        [0.5, inf, 0.5, 0.5],
    ]
    assert torch.equal(topk_filter.Model(top_k=50)(logits=logits), logits)  # k' = min(k, V)
    inputs = topk_filter.make_inputs(
        device=CPU, generator=torch.Generator().manual_seed(2), seq_len=3, hidden_size=500
    )
    out = topk_filter.Model()(**inputs)
    for row_in, row_out in zip(inputs["logits"].tolist(), out.tolist(), strict=True):
        threshold = sorted(row_in, reverse=True)[49]
        assert row_out == [v if v >= threshold else inf for v in row_in]
    assert torch.equal(
        inputs["logits"], torch.randn((3, 500), generator=torch.Generator().manual_seed(2))
    )


def test_draw_dependent_work_uses_the_expectation_for_unpublished_kwargs() -> None:
    kwargs = {"token_count": 100, "hidden_size": 2048, "intermediate_size": 768,
              "num_experts": 128, "top_k": 8}  # fmt: skip
    expected = fused_moe.expected_pairs(100, 128, 8)
    recorded = fused_moe.work({}, kwargs, pairs=expected)
    assert fused_moe.work({}, kwargs) == recorded
    published = {**kwargs, "token_count": 2400}  # id 9: recorded P = 18651
    assert fused_moe.work({}, published) == fused_moe.work({}, published, pairs=18651)
    assert fused_moe.work({}, published) != fused_moe.work(
        {}, published, pairs=fused_moe.expected_pairs(2400, 128, 8)
    )
