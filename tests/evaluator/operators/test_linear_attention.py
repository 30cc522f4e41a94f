"""The linear-attention references: causal_conv1d, chunk_delta_rule_output,
chunk_gated_delta_rule_state and gated_delta_rule_update (OPERATORS.md C.3, C.4, C.5, C.13).

Each reference is checked against the published W/Q, for its output structure and
determinism, and against an independent float64 loop written straight from the prose (with
the documented bf16 rounding points applied through torch conversions), plus closed-form
cases that fail if a rounding point, a mask, the head map or the pool write-back is wrong.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
import torch

from evaluator.operators import (
    causal_conv1d,
    chunk_delta_rule_output,
    chunk_gated_delta_rule_state,
    gated_delta_rule_update,
)
from tests.release import require_release

MODULES = (
    causal_conv1d,
    chunk_delta_rule_output,
    chunk_gated_delta_rule_state,
    gated_delta_rule_update,
)
BF16 = torch.bfloat16


# --------------------------------------------------------------------------- helpers


def rnd_bf16(value: float) -> float:
    """Round a Python float to bf16 (nearest even) and back."""
    return torch.tensor(value, dtype=torch.float32).to(BF16).item()


def head_of(value_head: int, num_v_heads: int, num_qk_heads: int) -> int:
    """The documented grouped head map, written out for the loops."""
    ratio = max(num_v_heads // num_qk_heads, 1)
    return min(value_head // ratio, num_qk_heads - 1)


def assert_within_bf16_steps(
    actual: torch.Tensor, expected: torch.Tensor, steps: int = 1, min_exact_share: float = 0.9
) -> None:
    """Every element within ``steps`` bf16 ulps of ``expected`` and most exactly equal."""
    assert actual.shape == expected.shape
    a, e = actual.double(), expected.to(BF16).double()
    ulp = torch.where(
        e == 0, torch.full_like(e, 2.0**-133), torch.exp2(torch.floor(torch.log2(e.abs())) - 7)
    )
    assert ((a - e).abs() <= steps * ulp).all(), float((a - e).abs().max())
    assert (a == e).double().mean().item() >= min_exact_share


def run_reference(
    module: ModuleType, init_kwargs: dict[str, Any], inputs: dict[str, torch.Tensor]
) -> Any:
    """Build the reference and call it on ``inputs``."""
    return module.SPEC.build_reference(init_kwargs)(**inputs)


def published(op: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(shapes.json, roofline.json["shapes"]) of one operator from the release data."""
    data_dir = require_release()
    shapes = json.loads((data_dir / op / "shapes.json").read_text())
    roofline = json.loads((data_dir / op / "roofline.json").read_text())["shapes"]
    return shapes, roofline


# Small shapes in the spirit of the published ones: GQA, partial chunks, odd head dims,
# several sequences mapped to non-trivial pool slots.
SMALL: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "causal_conv1d": ({}, {"token_count": 9, "dim": 6, "width": 4}),
    "chunk_delta_rule_output": (
        {"chunk_size": 4},
        {
            "batch_size": 2,
            "token_count": 11,
            "num_q_heads": 2,
            "num_v_heads": 4,
            "key_dim": 5,
            "value_dim": 3,
            "chunk_size": 4,
        },
    ),
    "chunk_gated_delta_rule_state": (
        {"chunk_size": 4},
        {
            "batch_size": 2,
            "token_count": 11,
            "num_k_heads": 2,
            "num_v_heads": 4,
            "key_dim": 5,
            "value_dim": 3,
            "state_count": 5,
        },
    ),
    "gated_delta_rule_update": (
        {},
        {
            "batch_size": 2,
            "token_count": 6,
            "num_q_heads": 2,
            "num_v_heads": 4,
            "key_dim": 5,
            "value_dim": 3,
            "state_count": 5,
        },
    ),
}


# --------------------------------------------------------------------------- W / Q


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.SPEC.slug)
def test_work_reproduces_every_published_shape(module: ModuleType) -> None:
    shapes, roofline = published(module.SPEC.slug)
    assert set(shapes) == set(roofline)
    for shape_id, shape in shapes.items():
        work = module.SPEC.work(shape["init_kwargs"], shape["input_kwargs"])
        stored = roofline[shape_id]
        assert work.w_flops == stored["semantic_W_flops"], shape_id
        assert work.q_read == stored["semantic_Q_read_bytes"], shape_id
        assert work.q_write == stored["semantic_Q_write_bytes"], shape_id


def test_specs_identify_the_operators() -> None:
    assert [(m.SPEC.slug, m.SPEC.atrex_id, m.SPEC.phase, m.SPEC.output_names) for m in MODULES] == [
        ("causal_conv1d", "atrex_003", "prefill", ("out",)),
        ("chunk_delta_rule_output", "atrex_004", "prefill", ("out",)),
        ("chunk_gated_delta_rule_state", "atrex_005", "prefill", ("h", "v_new", "final_state")),
        ("gated_delta_rule_update", "atrex_013", "decode", ("out", "final_state")),
    ]
    assert all(m.SPEC.dtype == "bf16" for m in MODULES)


# --------------------------------------------------------------------------- structure


EXPECTED_STRUCTURE: dict[str, Callable[[dict[str, Any]], dict[str, tuple[tuple, torch.dtype]]]] = {
    "causal_conv1d": lambda k: {"out": ((k["dim"], k["token_count"]), BF16)},
    "chunk_delta_rule_output": lambda k: {
        "out": ((k["batch_size"], k["token_count"], k["num_v_heads"], k["value_dim"]), BF16)
    },
    "chunk_gated_delta_rule_state": lambda k: {
        "h": ((k["batch_size"], 3, k["num_v_heads"], k["key_dim"], k["value_dim"]), BF16),
        "v_new": ((k["batch_size"], k["token_count"], k["num_v_heads"], k["value_dim"]), BF16),
        "final_state": (
            (k["state_count"], k["num_v_heads"], k["key_dim"], k["value_dim"]),
            torch.float32,
        ),
    },
    "gated_delta_rule_update": lambda k: {
        "out": ((k["batch_size"], k["token_count"], k["num_v_heads"], k["value_dim"]), BF16),
        "final_state": (
            (k["state_count"], k["num_v_heads"], k["key_dim"], k["value_dim"]),
            torch.float32,
        ),
    },
}


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.SPEC.slug)
def test_reference_structure_is_deterministic_and_leaves_inputs_alone(module: ModuleType) -> None:
    init_kwargs, input_kwargs = SMALL[module.SPEC.slug]
    inputs = module.SPEC.make_inputs(device="cpu", seed=11, **input_kwargs)
    before = {name: tensor.clone() for name, tensor in inputs.items()}
    first = run_reference(module, init_kwargs, inputs)
    second = run_reference(module, init_kwargs, inputs)
    for name, tensor in inputs.items():
        assert torch.equal(tensor, before[name]), name
    expected = EXPECTED_STRUCTURE[module.SPEC.slug](input_kwargs)
    if isinstance(first, torch.Tensor):
        assert list(expected) == ["out"]
        first, second = {"out": first}, {"out": second}
    assert list(first) == list(module.SPEC.output_names) == list(expected)
    for name, (shape, dtype) in expected.items():
        assert tuple(first[name].shape) == shape, name
        assert first[name].dtype == dtype, name
        assert torch.equal(first[name], second[name]), name
        assert torch.isfinite(first[name]).all(), name
        assert first[name].abs().max() > 0, name
        for tensor in inputs.values():  # outputs never alias inputs
            assert first[name].data_ptr() != tensor.data_ptr()


# --------------------------------------------------------------------------- inputs


def _draw_conv(gen: torch.Generator, k: dict[str, Any]) -> dict[str, torch.Tensor]:
    c, t, w = k["dim"], k["token_count"], k["width"]
    return {
        "x": torch.randn((c, t), dtype=BF16, generator=gen) * 0.02,
        "weight": torch.randn((c, w), dtype=BF16, generator=gen) * 0.02,
        "bias": torch.randn((c,), dtype=BF16, generator=gen) * 0.02,
        "initial_state": torch.randn((1, c, w - 1), dtype=BF16, generator=gen) * 0.02,
    }


def _draw_output(gen: torch.Generator, k: dict[str, Any]) -> dict[str, torch.Tensor]:
    b, t, hq, hv = k["batch_size"], k["token_count"], k["num_q_heads"], k["num_v_heads"]
    nc = -(-t // k["chunk_size"])
    return {
        "q": torch.randn((b, t, hq, k["key_dim"]), dtype=BF16, generator=gen) * 0.02,
        "k": torch.randn((b, t, hq, k["key_dim"]), dtype=BF16, generator=gen),
        "v": torch.randn((b, t, hv, k["value_dim"]), dtype=BF16, generator=gen) * 0.02,
        "h": torch.randn((b, nc, hv, k["key_dim"], k["value_dim"]), dtype=BF16, generator=gen)
        * 0.02,
        "g": -torch.rand((b, t, hv), generator=gen),
    }


def _draw_state(gen: torch.Generator, k: dict[str, Any]) -> dict[str, torch.Tensor]:
    b, t, hk, hv = k["batch_size"], k["token_count"], k["num_k_heads"], k["num_v_heads"]
    s = k["state_count"]
    return {
        "k": torch.randn((b, t, hk, k["key_dim"]), dtype=BF16, generator=gen) * 0.02,
        "w": torch.randn((b, t, hv, k["key_dim"]), dtype=BF16, generator=gen) * 0.02,
        "u": torch.randn((b, t, hv, k["value_dim"]), dtype=BF16, generator=gen) * 0.02,
        "g": -torch.rand((b, t, hv), generator=gen),
        "initial_state": torch.randn((s, hv, k["key_dim"], k["value_dim"]), generator=gen) * 0.02,
        "initial_state_indices": torch.arange(b, dtype=torch.int32) % s,
    }


def _draw_update(gen: torch.Generator, k: dict[str, Any]) -> dict[str, torch.Tensor]:
    b, t, hq, hv = k["batch_size"], k["token_count"], k["num_q_heads"], k["num_v_heads"]
    s, kd, vd = k["state_count"], k["key_dim"], k["value_dim"]
    return {
        "A_log": torch.randn((hv,), generator=gen) * 0.02,
        "a": torch.randn((b, t, hv), dtype=BF16, generator=gen) * 0.02,
        "dt_bias": torch.randn((hv,), dtype=BF16, generator=gen) * 0.02,
        "q": torch.randn((b, t, hq, kd), dtype=BF16, generator=gen) * 0.02,
        "k": torch.randn((b, t, hq, kd), dtype=BF16, generator=gen),
        "v": torch.randn((b, t, hv, vd), dtype=BF16, generator=gen) * 0.02,
        "b": torch.randn((b, t, hv), dtype=BF16, generator=gen),
        "initial_state": torch.randn((s, hv, kd, vd), generator=gen) * 0.02,
        "initial_state_indices": torch.arange(b, dtype=torch.int32) % s,
    }


DRAWS = {
    "causal_conv1d": _draw_conv,
    "chunk_delta_rule_output": _draw_output,
    "chunk_gated_delta_rule_state": _draw_state,
    "gated_delta_rule_update": _draw_update,
}


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.SPEC.slug)
def test_inputs_follow_the_documented_draws_in_order(module: ModuleType) -> None:
    _, input_kwargs = SMALL[module.SPEC.slug]
    inputs = module.SPEC.make_inputs(device="cpu", seed=5, **input_kwargs)
    again = module.SPEC.make_inputs(device="cpu", seed=5, **input_kwargs)
    other = module.SPEC.make_inputs(device="cpu", seed=6, **input_kwargs)
    expected = DRAWS[module.SPEC.slug](torch.Generator().manual_seed(5), input_kwargs)
    assert list(inputs) == list(expected)  # the forward's keyword order
    for name, tensor in expected.items():
        assert inputs[name].dtype == tensor.dtype, name
        assert torch.equal(inputs[name], tensor), name
        assert torch.equal(again[name], tensor), name
    assert not torch.equal(other[next(iter(other))], inputs[next(iter(inputs))])


def test_input_statistics_match_the_documented_scales() -> None:
    conv = causal_conv1d.SPEC.make_inputs(device="cpu", seed=1, token_count=300, dim=64)
    assert conv["initial_state"].shape == (1, 64, 3)
    assert conv["x"].float().std().item() == pytest.approx(0.02, rel=0.05)

    out_in = chunk_delta_rule_output.SPEC.make_inputs(
        device="cpu",
        seed=1,
        batch_size=1,
        token_count=130,
        num_q_heads=2,
        num_v_heads=4,
        key_dim=16,
        value_dim=16,
    )
    assert out_in["h"].shape == (1, 3, 4, 16, 16)
    assert out_in["q"].float().std().item() == pytest.approx(0.02, rel=0.1)
    assert out_in["k"].float().std().item() == pytest.approx(1.0, rel=0.1)
    g = out_in["g"]
    assert g.dtype == torch.float32 and (g <= 0).all() and (g > -1).all()
    assert g.mean().item() == pytest.approx(-0.5, abs=0.05)

    state_in = chunk_gated_delta_rule_state.SPEC.make_inputs(
        device="cpu",
        seed=1,
        batch_size=3,
        token_count=70,
        num_k_heads=2,
        num_v_heads=4,
        key_dim=8,
        value_dim=8,
        state_count=2,
    )
    assert state_in["initial_state"].dtype == torch.float32
    assert state_in["initial_state"].std().item() == pytest.approx(0.02, rel=0.1)
    assert state_in["initial_state_indices"].dtype == torch.int32
    assert state_in["initial_state_indices"].tolist() == [0, 1, 0]  # b mod S

    upd = gated_delta_rule_update.SPEC.make_inputs(
        device="cpu",
        seed=1,
        batch_size=1,
        token_count=200,
        num_q_heads=2,
        num_v_heads=4,
        key_dim=16,
        value_dim=16,
        state_count=2,
    )
    assert upd["A_log"].dtype == torch.float32 and upd["A_log"].shape == (4,)
    assert upd["b"].float().std().item() == pytest.approx(1.0, rel=0.1)
    assert upd["k"].float().std().item() == pytest.approx(1.0, rel=0.1)
    assert upd["a"].float().std().item() == pytest.approx(0.02, rel=0.1)
    assert upd["initial_state_indices"].tolist() == [0]


# --------------------------------------------------------------------------- causal_conv1d


def conv_loop(inputs: dict[str, torch.Tensor], activation: bool) -> torch.Tensor:
    """causal_conv1d from the prose: explicit loops in float64, bf16 rounding points."""
    x, weight = inputs["x"].double(), inputs["weight"].double()
    bias, state = inputs["bias"].double(), inputs["initial_state"].double()
    channels, tokens = x.shape
    width = weight.shape[1]
    out = torch.empty(channels, tokens, dtype=torch.float64)
    for c in range(channels):
        seq = [state[0, c, j].item() for j in range(width - 1)] + x[c].tolist()
        for t in range(tokens):
            y = bias[c].item() + sum(weight[c, j].item() * seq[t + j] for j in range(width))
            y = rnd_bf16(y)
            out[c, t] = rnd_bf16(y / (1.0 + math.exp(-y))) if activation else y
    return out


def test_conv_matches_an_independent_loop() -> None:
    inputs = causal_conv1d.SPEC.make_inputs(device="cpu", seed=3, token_count=13, dim=6)
    got = run_reference(causal_conv1d, {}, inputs)
    assert_within_bf16_steps(got, conv_loop(inputs, activation=True))
    raw = run_reference(causal_conv1d, {"activation": None}, inputs)
    assert_within_bf16_steps(raw, conv_loop(inputs, activation=False))
    swish = run_reference(causal_conv1d, {"activation": "swish"}, inputs)
    assert torch.equal(swish, got)


def test_conv_taps_run_oldest_state_first_and_current_token_last() -> None:
    channels, tokens = 2, 5
    x = torch.arange(1, channels * tokens + 1, dtype=BF16).reshape(channels, tokens)
    state = torch.tensor([[[100.0, 200.0, 300.0], [400.0, 500.0, 600.0]]], dtype=BF16)
    bias = torch.zeros(channels, dtype=BF16)
    current = torch.tensor([[0.0, 0.0, 0.0, 1.0]] * channels, dtype=BF16)
    oldest = torch.tensor([[1.0, 0.0, 0.0, 0.0]] * channels, dtype=BF16)
    model = causal_conv1d.Model(activation=None)
    assert torch.equal(model(x=x, weight=current, bias=bias, initial_state=state), x)
    shifted = model(x=x, weight=oldest, bias=bias, initial_state=state)
    assert shifted[0].tolist() == [100.0, 200.0, 300.0, 1.0, 2.0]
    assert shifted[1].tolist() == [400.0, 500.0, 600.0, 6.0, 7.0]


def test_conv_rounds_before_silu() -> None:
    # y = 1 + 2^-9 is not a bf16 value: rounded first it is 1.0, whose SiLU is 0.7310...
    x = torch.tensor([[1.0]], dtype=BF16)
    weight = torch.tensor([[0.0, 0.0, 1.0]], dtype=BF16)
    bias = torch.tensor([2.0**-9], dtype=torch.float32).to(BF16)
    out = causal_conv1d.Model()(
        x=x, weight=weight, bias=bias, initial_state=torch.zeros(1, 1, 2, dtype=BF16)
    )
    assert out.item() == rnd_bf16(1.0 / (1.0 + math.exp(-1.0)))


def test_conv_rejects_an_unknown_activation() -> None:
    with pytest.raises(ValueError, match="activation"):
        causal_conv1d.Model(activation="gelu")


# --------------------------------------------------------------------------- chunk output


def output_loop(
    inputs: dict[str, torch.Tensor], chunk: int, scale: float | None = None
) -> torch.Tensor:
    """chunk_delta_rule_output from the prose, per (b, j, token) in float64."""
    q, k, v = inputs["q"].double(), inputs["k"].double(), inputs["v"].double()
    h, g = inputs["h"].double(), inputs["g"].double()
    batch, tokens, hq, key_dim = q.shape
    hv = v.shape[2]
    scale = key_dim**-0.5 if scale is None else scale
    out = torch.empty(v.shape, dtype=torch.float64)
    for b in range(batch):
        for j in range(hv):
            src = head_of(j, hv, hq)
            for t in range(tokens):
                c = t // chunk
                o = (q[b, t, src] @ h[b, c, j]) * math.exp(g[b, t, j].item())
                for s in range(c * chunk, t + 1):
                    exponent = (g[b, t, j] - g[b, s, j]).item()
                    if exponent > 0:
                        continue
                    a = rnd_bf16((q[b, t, src] @ k[b, s, src]).item() * math.exp(exponent))
                    o = o + a * v[b, s, j]
                out[b, t, j] = o * scale
    return out


def monotone_gates(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    """Cumulative sums of −U[0, 0.3) along the token axis: the production gate pattern."""
    steps = -0.3 * torch.rand(shape, generator=torch.Generator().manual_seed(seed))
    return steps.cumsum(dim=1)


@pytest.mark.parametrize("gates", ["random", "monotone"])
@pytest.mark.parametrize("heads", [(2, 4), (4, 6), (3, 3)], ids=["r2", "r1-clamped", "r1"])
def test_chunk_output_matches_an_independent_loop(gates: str, heads: tuple[int, int]) -> None:
    hq, hv = heads
    kwargs = {
        "batch_size": 2,
        "token_count": 10,
        "num_q_heads": hq,
        "num_v_heads": hv,
        "key_dim": 5,
        "value_dim": 3,
        "chunk_size": 4,
    }
    inputs = chunk_delta_rule_output.SPEC.make_inputs(device="cpu", seed=7, **kwargs)
    if gates == "monotone":
        inputs["g"] = monotone_gates(tuple(inputs["g"].shape), seed=8)
    got = run_reference(chunk_delta_rule_output, {"chunk_size": 4}, inputs)
    assert_within_bf16_steps(got, output_loop(inputs, chunk=4))


def test_chunk_output_explicit_scale_multiplies_both_terms() -> None:
    kwargs = SMALL["chunk_delta_rule_output"][1]
    inputs = chunk_delta_rule_output.SPEC.make_inputs(device="cpu", seed=9, **kwargs)
    got = run_reference(chunk_delta_rule_output, {"chunk_size": 4, "scale": 0.7}, inputs)
    assert_within_bf16_steps(got, output_loop(inputs, chunk=4, scale=0.7))


def _one_head_output_inputs(
    q: list[float], k: list[float], v: list[float], g: list[float]
) -> dict[str, torch.Tensor]:
    tokens = len(q)
    return {
        "q": torch.tensor(q, dtype=BF16).reshape(1, tokens, 1, 1),
        "k": torch.tensor(k, dtype=BF16).reshape(1, tokens, 1, 1),
        "v": torch.tensor(v, dtype=BF16).reshape(1, tokens, 1, 1),
        "h": torch.zeros(1, 1, 1, 1, 1, dtype=BF16),
        "g": torch.tensor(g, dtype=torch.float32).reshape(1, tokens, 1),
    }


def test_chunk_output_positive_gate_exponent_zeroes_the_pair() -> None:
    # Token 1's gate is below token 0's: G[1] − G[0] = −0.5 keeps the pair; token 2's gate
    # is above token 0's, so the (2, 0) pair is masked however large k[0] is (a clamp to
    # exp(0) = 1 would leak 1000·1 into out[2]).
    inputs = _one_head_output_inputs(
        q=[1.0, 1.0, 1.0], k=[1000.0, 0.0, 0.0], v=[1.0, 0.0, 0.0], g=[-0.5, -1.0, 0.0]
    )
    out = chunk_delta_rule_output.Model(chunk_size=4)(**inputs)
    assert out[0, 2, 0, 0].item() == 0.0
    assert out[0, 1, 0, 0].item() == rnd_bf16(rnd_bf16(1000.0 * math.exp(-0.5)))
    assert out[0, 0, 0, 0].item() == 1000.0


def test_chunk_output_rounds_the_attention_matrix_to_bf16() -> None:
    # A[1,1] = (1 + 2^-4)^2 = 1 + 2^-3 + 2^-8 rounds (tie to even) to 1 + 2^-3, and
    # A[1,0] = −(1 + 2^-4), so out[1] = 2^-4 exactly; without the rounding it is 2^-4 + 2^-8.
    x = 1.0 + 2.0**-4
    inputs = _one_head_output_inputs(q=[0.0, x], k=[-1.0, x], v=[1.0, 1.0], g=[0.0, 0.0])
    out = chunk_delta_rule_output.Model(chunk_size=2)(**inputs)
    assert out[0, :, 0, 0].tolist() == [0.0, 2.0**-4]


def test_chunk_output_inter_term_uses_the_chunks_own_start_state() -> None:
    # K = V = 1, two chunks of 2; h = [2, 3]; q = 1, k = 0, g = 0: out = h of the chunk.
    inputs = _one_head_output_inputs(q=[1.0] * 4, k=[0.0] * 4, v=[0.0] * 4, g=[0.0] * 4)
    inputs["h"] = torch.tensor([2.0, 3.0], dtype=BF16).reshape(1, 2, 1, 1, 1)
    out = chunk_delta_rule_output.Model(chunk_size=2)(**inputs)
    assert out[0, :, 0, 0].tolist() == [2.0, 2.0, 3.0, 3.0]


def test_chunk_output_partial_last_chunk_sees_only_real_tokens() -> None:
    kwargs = dict(SMALL["chunk_delta_rule_output"][1], token_count=12)
    full = chunk_delta_rule_output.SPEC.make_inputs(device="cpu", seed=4, **kwargs)
    cut = {name: t[:, :10] for name, t in full.items()}  # h keeps its 3 chunk states
    model = chunk_delta_rule_output.Model(chunk_size=4)
    assert torch.equal(model(**cut), model(**full)[:, :10])


# --------------------------------------------------------------------------- chunk state


def state_loop(inputs: dict[str, torch.Tensor], chunk: int) -> dict[str, torch.Tensor]:
    """chunk_gated_delta_rule_state from the prose, per (b, j) and token, in float64."""
    k, w, u = inputs["k"].double(), inputs["w"].double(), inputs["u"].double()
    g, pool = inputs["g"].double(), inputs["initial_state"]
    slots = inputs["initial_state_indices"].tolist()
    batch, tokens, hk, key_dim = k.shape
    hv, value_dim = u.shape[2], u.shape[3]
    num_chunks = -(-tokens // chunk)
    h = torch.empty(batch, num_chunks, hv, key_dim, value_dim, dtype=torch.float64)
    v_new = torch.empty(u.shape, dtype=torch.float64)
    final = pool.clone().double()
    for b in range(batch):
        for j in range(hv):
            src = head_of(j, hv, hk)
            sigma = pool[slots[b], j].double()
            for c in range(num_chunks):
                rows = range(c * chunk, min(tokens, (c + 1) * chunk))
                sigma_b = sigma.to(BF16).double()
                h[b, c, j] = sigma_b
                gamma = g[b, rows[-1], j].item()
                update = torch.zeros(key_dim, value_dim, dtype=torch.float64)
                for i in rows:
                    corrected = u[b, i, j] - w[b, i, j] @ sigma_b
                    v_new[b, i, j] = corrected.to(BF16).double()
                    exponent = gamma - g[b, i, j].item()
                    factor = math.exp(exponent) if exponent <= 0 else 0.0
                    gated = (corrected * factor).to(BF16).double()
                    update += torch.outer(k[b, i, src], gated)
                sigma = sigma * math.exp(gamma) + update
            final[slots[b], j] = sigma
    return {"h": h, "v_new": v_new, "final_state": final}


@pytest.mark.parametrize("gates", ["random", "monotone"])
@pytest.mark.parametrize("heads", [(2, 4), (4, 6)], ids=["r2", "r1-clamped"])
def test_chunk_state_matches_an_independent_loop(gates: str, heads: tuple[int, int]) -> None:
    hk, hv = heads
    kwargs = {
        "batch_size": 3,
        "token_count": 10,
        "num_k_heads": hk,
        "num_v_heads": hv,
        "key_dim": 5,
        "value_dim": 3,
        "state_count": 6,
    }
    inputs = chunk_gated_delta_rule_state.SPEC.make_inputs(device="cpu", seed=2, **kwargs)
    inputs["initial_state_indices"] = torch.tensor([4, 1, 3], dtype=torch.int32)
    if gates == "monotone":
        inputs["g"] = monotone_gates(tuple(inputs["g"].shape), seed=3)
    got = run_reference(chunk_gated_delta_rule_state, {"chunk_size": 4}, inputs)
    expected = state_loop(inputs, chunk=4)
    assert_within_bf16_steps(got["h"], expected["h"])
    assert_within_bf16_steps(got["v_new"], expected["v_new"])
    final = got["final_state"]
    assert final.dtype == torch.float32
    scale = expected["final_state"].abs().max().item()
    assert (final.double() - expected["final_state"]).abs().max().item() <= 1e-5 * scale
    for slot in (0, 2, 5):  # untouched pool slots: bit-identical
        assert torch.equal(final[slot], inputs["initial_state"][slot])
    for slot in (1, 3, 4):
        assert not torch.equal(final[slot], inputs["initial_state"][slot])


def _one_head_state_inputs(
    k: list[float], w: list[float], u: list[float], g: list[float], sigma: float
) -> dict[str, torch.Tensor]:
    tokens = len(k)
    return {
        "k": torch.tensor(k, dtype=BF16).reshape(1, tokens, 1, 1),
        "w": torch.tensor(w, dtype=BF16).reshape(1, tokens, 1, 1),
        "u": torch.tensor(u, dtype=BF16).reshape(1, tokens, 1, 1),
        "g": torch.tensor(g, dtype=torch.float32).reshape(1, tokens, 1),
        "initial_state": torch.tensor([[[[sigma]]]], dtype=torch.float32),
        "initial_state_indices": torch.tensor([0], dtype=torch.int32),
    }


def test_chunk_state_rounds_the_state_for_the_w_product_only() -> None:
    # Σ0 = 1 + 2^-10 (bf16: 1.0). Chunk 0 adds nothing, so Σ stays 1 + 2^-10 in fp32;
    # chunk 1: Vc = u − w·rnd_bf16(Σ) = 1 − 1 = 0 (with the fp32 Σ it would be −2^-10).
    inputs = _one_head_state_inputs(
        k=[1.0, 1.0], w=[0.0, 1.0], u=[0.0, 1.0], g=[0.0, 0.0], sigma=1.0 + 2.0**-10
    )
    got = chunk_gated_delta_rule_state.Model(chunk_size=1)(**inputs)
    assert got["h"].flatten().tolist() == [1.0, 1.0]
    assert got["v_new"].flatten().tolist() == [0.0, 0.0]
    assert got["final_state"].item() == 1.0 + 2.0**-10


def test_chunk_state_positive_decay_exponent_drops_the_row() -> None:
    # One chunk of 2: γ = g[1] = −0.25; token 0 has γ − g[0] = +0.25 > 0 → factor 0, not 1,
    # so its huge value never reaches the state; token 1 has factor exp(0) = 1.
    inputs = _one_head_state_inputs(
        k=[1.0, 1.0], w=[0.0, 0.0], u=[1000.0, 3.0], g=[-0.5, -0.25], sigma=2.0
    )
    got = chunk_gated_delta_rule_state.Model(chunk_size=2)(**inputs)
    expected = torch.tensor(2.0, dtype=torch.float32) * torch.exp(torch.tensor(-0.25)) + 3.0
    assert got["final_state"].item() == expected.item()
    assert got["v_new"].flatten().tolist() == [1000.0, 3.0]


def test_chunk_state_scales_rows_before_rounding_them() -> None:
    # Ṽ = rnd_bf16(f · Vc) from the unrounded Vc: Vc = u − w·Σ with u = 1, w·Σ = 2^-9
    # gives Vc = 1 − 2^-9 (v_new rounds it to 1.0); f = exp(−0.125) on the first row.
    # rnd_bf16(f·Vc) = 0.87890625, rnd_bf16(f·1.0) = 0.8828125, f·Vc = 0.88077...
    inputs = _one_head_state_inputs(
        k=[1.0, 0.0], w=[2.0**-9, 0.0], u=[1.0, 0.0], g=[0.0, -0.125], sigma=1.0
    )
    got = chunk_gated_delta_rule_state.Model(chunk_size=2)(**inputs)
    decay = torch.exp(torch.tensor(-0.125))
    expected = torch.tensor(1.0) * decay + torch.tensor(0.87890625)
    assert got["final_state"].item() == expected.item()
    assert got["v_new"].flatten().tolist() == [1.0, 0.0]


def test_chunk_state_partial_last_chunk_uses_its_own_last_gate() -> None:
    # T = 3 with chunks of 2: the last chunk is token 2 alone, so γ = g[2] and f = exp(0).
    inputs = _one_head_state_inputs(
        k=[0.0, 0.0, 1.0], w=[0.0] * 3, u=[0.0, 0.0, 5.0], g=[-0.5, -0.5, -0.75], sigma=0.0
    )
    got = chunk_gated_delta_rule_state.Model(chunk_size=2)(**inputs)
    assert got["h"].shape == (1, 2, 1, 1, 1)
    assert got["final_state"].item() == 5.0


# --------------------------------------------------------------------------- recurrent update


def update_loop(
    inputs: dict[str, torch.Tensor],
    *,
    beta: float = 1.0,
    threshold: float = 20.0,
    scale: float | None = None,
    l2norm: bool = True,
) -> dict[str, torch.Tensor]:
    """gated_delta_rule_update from the prose, per (b, j, t), in float64."""
    q, k, v = inputs["q"].double(), inputs["k"].double(), inputs["v"].double()
    a, bgate = inputs["a"].double(), inputs["b"].double()
    a_log, dt_bias = inputs["A_log"].double(), inputs["dt_bias"].double()
    pool, slots = inputs["initial_state"], inputs["initial_state_indices"].tolist()
    batch, tokens, hq, key_dim = q.shape
    hv = v.shape[2]
    scale = key_dim**-0.5 if scale is None else scale
    out = torch.empty(v.shape, dtype=torch.float64)
    final = pool.clone().double()
    for b in range(batch):
        for j in range(hv):
            src = head_of(j, hv, hq)
            sigma = pool[slots[b], j].double()
            for t in range(tokens):
                z = a[b, t, j].item() + dt_bias[j].item()
                soft = z if beta * z > threshold else math.log(1 + math.exp(beta * z)) / beta
                decay = math.exp(-math.exp(a_log[j].item()) * soft)
                write = 1.0 / (1.0 + math.exp(-bgate[b, t, j].item()))
                qv, kv = q[b, t, src], k[b, t, src]
                if l2norm:
                    qv = qv / max(qv.norm().item(), 1e-6)
                    kv = kv / max(kv.norm().item(), 1e-6)
                sigma = sigma * decay
                delta = (v[b, t, j] - sigma.T @ kv) * write
                sigma = sigma + torch.outer(kv, delta)
                out[b, t, j] = sigma.T @ (qv * scale)
            final[slots[b], j] = sigma
    return {"out": out, "final_state": final}


def _compare_update(got: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    assert_within_bf16_steps(got["out"], expected["out"])
    scale = expected["final_state"].abs().max().item()
    diff = (got["final_state"].double() - expected["final_state"]).abs().max().item()
    assert diff <= 1e-5 * scale


@pytest.mark.parametrize("heads", [(2, 4), (4, 6)], ids=["r2", "r1-clamped"])
def test_update_matches_an_independent_loop(heads: tuple[int, int]) -> None:
    hq, hv = heads
    kwargs = {
        "batch_size": 3,
        "token_count": 5,
        "num_q_heads": hq,
        "num_v_heads": hv,
        "key_dim": 5,
        "value_dim": 3,
        "state_count": 5,
    }
    inputs = gated_delta_rule_update.SPEC.make_inputs(device="cpu", seed=4, **kwargs)
    inputs["initial_state_indices"] = torch.tensor([3, 0, 4], dtype=torch.int32)
    got = run_reference(gated_delta_rule_update, {}, inputs)
    _compare_update(got, update_loop(inputs))
    for slot in (1, 2):
        assert torch.equal(got["final_state"][slot], inputs["initial_state"][slot])
    for slot in (0, 3, 4):
        assert not torch.equal(got["final_state"][slot], inputs["initial_state"][slot])


def test_update_options_softplus_threshold_scale_and_no_l2norm() -> None:
    kwargs = dict(SMALL["gated_delta_rule_update"][1], token_count=4)
    inputs = gated_delta_rule_update.SPEC.make_inputs(device="cpu", seed=6, **kwargs)
    # Large a on one entry: β·z above the threshold takes the linear branch.
    inputs["a"] = inputs["a"].clone()
    inputs["a"][0, 1, 2] = 1.5
    init = {"softplus_beta": 2.0, "softplus_threshold": 2.0, "scale": 0.3, "use_qk_l2norm": False}
    got = run_reference(gated_delta_rule_update, init, inputs)
    expected = update_loop(inputs, beta=2.0, threshold=2.0, scale=0.3, l2norm=False)
    _compare_update(got, expected)


def test_update_reads_out_with_the_updated_state() -> None:
    # K = V = 1, Σ0 = 0, q = k = 1 (normalised: 1), v = 2, b large (β_t ≈ 1), scale 1:
    # Σ1 = δ = 2·sigmoid(b) and out = Σ1 (a read-out before the update would give 0).
    inputs = {
        "A_log": torch.zeros(1),
        "a": torch.zeros(1, 1, 1, dtype=BF16),
        "dt_bias": torch.zeros(1, dtype=BF16),
        "q": torch.ones(1, 1, 1, 1, dtype=BF16),
        "k": torch.ones(1, 1, 1, 1, dtype=BF16),
        "v": torch.full((1, 1, 1, 1), 2.0, dtype=BF16),
        "b": torch.full((1, 1, 1), 4.0, dtype=BF16),
        "initial_state": torch.zeros(2, 1, 1, 1),
        "initial_state_indices": torch.tensor([1], dtype=torch.int32),
    }
    got = gated_delta_rule_update.Model()(**inputs)
    expected_state = 2.0 * torch.sigmoid(torch.tensor(4.0)).item()
    assert got["final_state"][1].item() == pytest.approx(expected_state, rel=1e-6)
    assert got["final_state"][0].item() == 0.0
    assert got["out"].item() == rnd_bf16(expected_state)


# --------------------------------------------------------------------------- published shapes


CHEAP_SHAPES = {
    "causal_conv1d": ["0", "1", "5"],
    "chunk_delta_rule_output": ["0"],
    "chunk_gated_delta_rule_state": ["0"],
    "gated_delta_rule_update": ["0", "8"],
}


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.SPEC.slug)
def test_cheap_published_shapes_run_on_cpu(module: ModuleType) -> None:
    shapes, _ = published(module.SPEC.slug)
    for shape_id in CHEAP_SHAPES[module.SPEC.slug]:
        shape = shapes[shape_id]
        inputs = module.SPEC.make_inputs(device="cpu", seed=0, **shape["input_kwargs"])
        result = run_reference(module, shape["init_kwargs"], inputs)
        leaves = result.values() if isinstance(result, dict) else [result]
        assert all(torch.isfinite(leaf).all() for leaf in leaves), shape_id
