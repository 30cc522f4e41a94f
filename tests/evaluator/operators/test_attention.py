"""Attention-group references: W/Q against the release, structure, inputs, hand-checked maths.

Operators: attention_forward, unified_attention, paged_attention_decode, mla_decode_attention,
reshape_and_cache, fused_qkv_rope, mrope. The hand checks recompute each operator a different
way (explicit float64 loops over sequences, heads, tokens and elements, reading the caches
element by element through the documented layouts) and must agree within one output ulp.
"""

from __future__ import annotations

import json
import math
from types import ModuleType
from typing import Any

import pytest
import torch

from evaluator.operators import (
    _attention,
    attention_forward,
    fused_qkv_rope,
    mla_decode_attention,
    mrope,
    paged_attention_decode,
    reshape_and_cache,
    unified_attention,
)
from tests.release import require_release

MODULES: dict[str, ModuleType] = {
    module.SPEC.slug: module
    for module in (
        attention_forward,
        unified_attention,
        paged_attention_decode,
        mla_decode_attention,
        reshape_and_cache,
        fused_qkv_rope,
        mrope,
    )
}
# Published shapes whose W/Q the formulas cannot reproduce within 1%: none.
WQ_EXCEPTIONS: dict[str, list[str]] = {slug: [] for slug in MODULES}
CPU = torch.device("cpu")
MANTISSA_BITS = {torch.bfloat16: 7, torch.float16: 10, torch.float32: 23}


def _draw(module: ModuleType, seed: int, **input_kwargs: Any) -> dict[str, torch.Tensor]:
    return module.SPEC.make_inputs(device=CPU, seed=seed, **input_kwargs)


def _run(module: ModuleType, init_kwargs: dict | None, inputs: dict[str, torch.Tensor]) -> Any:
    with torch.inference_mode():
        return module.SPEC.build_reference(init_kwargs)(**inputs)


def _assert_within_one_ulp(actual: torch.Tensor, exact: torch.Tensor) -> None:
    """Every element of ``actual`` is within one ulp (of its dtype) of the float64 ``exact``.

    A slack of 2^-20 of the largest magnitude covers fp32 rounding noise where a result
    cancels to almost zero (its own ulp is then far below the fp32 error of the operands).
    """
    bits = MANTISSA_BITS[actual.dtype]
    tiny = torch.finfo(actual.dtype).tiny
    magnitude = exact.abs().clamp_min(tiny)
    ulp = torch.exp2(torch.floor(torch.log2(magnitude)) - bits)
    slack = 2.0**-20 * float(exact.abs().max()) if exact.numel() else 0.0
    error = (actual.double() - exact).abs()
    worst = (error / (ulp + slack)).max().item() if error.numel() else 0.0
    assert worst <= 1.0, f"{worst:.2f} ulp off"


def _softmax_attention_f64(
    q_row: torch.Tensor, keys: list[torch.Tensor], values: list[torch.Tensor], scale: float
) -> torch.Tensor:
    """One query row over explicit key/value lists, float64, with math.exp."""
    scores = [float(q_row.double() @ key.double()) * scale for key in keys]
    top = max(scores)
    weights = [math.exp(score - top) for score in scores]
    total = sum(weights)
    out = torch.zeros(values[0].shape[-1], dtype=torch.float64)
    for weight, value in zip(weights, values, strict=True):
        out += (weight / total) * value.double()
    return out


# --- 1. W/Q against the published roofline ---------------------------------------------


@pytest.mark.parametrize("slug", sorted(MODULES))
def test_work_reproduces_every_published_shape(slug):
    data_dir = require_release()
    shapes = json.loads((data_dir / slug / "shapes.json").read_text())
    published = json.loads((data_dir / slug / "roofline.json").read_text())["shapes"]
    assert set(shapes) == set(published)
    off = []
    for shape_id, shape in shapes.items():
        work = MODULES[slug].SPEC.work(shape["init_kwargs"], shape["input_kwargs"])
        stored = published[shape_id]
        assert set(work.w_flops) == set(stored["semantic_W_flops"]), shape_id
        pairs = [
            (work.q_read, stored["semantic_Q_read_bytes"]),
            (work.q_write, stored["semantic_Q_write_bytes"]),
        ]
        pairs += [(work.w_flops[key], value) for key, value in stored["semantic_W_flops"].items()]
        if any(abs(mine - theirs) > 0.01 * abs(theirs) for mine, theirs in pairs):
            off.append(shape_id)
    assert off == WQ_EXCEPTIONS[slug]


def test_fused_qkv_rope_work_counts_the_bias_only_when_present():
    kwargs = {"total_tokens": 3, "num_heads": 4, "num_kv_heads": 2, "head_dim": 8}
    plain = fused_qkv_rope.work({"rope_dim": 8}, kwargs)
    biased = fused_qkv_rope.work({"rope_dim": 8}, {**kwargs, "with_bias": True})
    assert biased.w_flops["fp16"] - plain.w_flops["fp16"] == 3 * 8 * 8
    assert biased.q_read - plain.q_read == 2 * 8 * 8
    assert biased.q_write == plain.q_write


# --- 2. Structure, dtypes, determinism, inputs untouched on small shapes ------------------

SMALL_CASES = [
    ("attention_forward", None, {"seq_lens": [5, 1, 12], "num_heads": 4, "head_dim": 72}),
    ("attention_forward", None, {"seq_lens": [3, 0, 4], "num_heads": 2, "head_dim": 16}),
    (
        "unified_attention",
        None,
        {
            "num_seqs": 3,
            "seq_lens": [5, 17, 33],
            "num_query_heads": 8,
            "num_kv_heads": 2,
            "head_size": 72,
            "block_size": 16,
        },
    ),
    (
        "unified_attention",
        None,
        {
            "num_seqs": 1,
            "seq_lens": [7],
            "num_query_heads": 4,
            "num_kv_heads": 4,
            "head_size": 80,
            "block_size": 4,
        },
    ),
    (
        "paged_attention_decode",
        None,
        {
            "num_seqs": 3,
            "ctx_len": 37,
            "num_query_heads": 8,
            "num_kv_heads": 2,
            "head_size": 64,
            "block_size": 16,
            "dtype": "bf16",
        },
    ),
    (
        "paged_attention_decode",
        None,
        {
            "num_seqs": 2,
            "ctx_len": 9,
            "num_query_heads": 3,
            "num_kv_heads": 3,
            "head_size": 32,
            "block_size": 4,
            "dtype": "fp16",
        },
    ),
    (
        "mla_decode_attention",
        {"nhead": 4, "kv_lora_rank": 32, "qk_rope_head_dim": 16},
        {"batch_size": 3, "ctx_len": 9, "nhead": 4, "kv_lora_rank": 32, "qk_rope_head_dim": 16},
    ),
    ("reshape_and_cache", None, {"shape": [37, 2, 24], "block_size": 16}),
    (
        "fused_qkv_rope",
        {"num_heads": 4, "num_kv_heads": 2, "head_dim": 24, "rope_dim": 16},
        {
            "total_tokens": 5,
            "num_heads": 4,
            "num_kv_heads": 2,
            "head_dim": 24,
            "with_bias": True,
            "dtype": "bf16",
        },
    ),
    (
        "fused_qkv_rope",
        {"num_heads": 6, "num_kv_heads": 2, "head_dim": 16, "rope_dim": 16},
        {"total_tokens": 3, "num_heads": 6, "num_kv_heads": 2, "head_dim": 16, "dtype": "fp16"},
    ),
    (
        "mrope",
        {"head_size": 32, "rotary_dim": 24, "mrope_section": [4, 4, 4]},
        {
            "token_count": 6,
            "num_query_heads": 4,
            "num_kv_heads": 2,
            "head_size": 32,
            "rotary_dim": 24,
        },
    ),
    (
        "mrope",
        {
            "head_size": 16,
            "rotary_dim": 16,
            "mrope_section": [2, 3, 3],
            "mrope_interleaved": True,
            "is_neox_style": False,
        },
        {
            "token_count": 4,
            "num_query_heads": 2,
            "num_kv_heads": 1,
            "head_size": 16,
            "rotary_dim": 16,
        },
    ),
]


def _expected_structure(slug: str, kw: dict) -> Any:
    """(kind, {name: (shape, dtype)}) the reference must return for these input kwargs."""
    if slug == "attention_forward":
        tokens = sum(kw["seq_lens"])
        return "tensor", {"out": ((tokens, kw["num_heads"], kw["head_dim"]), torch.bfloat16)}
    if slug == "unified_attention":
        shape = (sum(kw["seq_lens"]), kw["num_query_heads"], kw["head_size"])
        return "tensor", {"out": (shape, torch.bfloat16)}
    if slug == "paged_attention_decode":
        dtype = torch.bfloat16 if kw["dtype"] == "bf16" else torch.float16
        return "tensor", {"out": ((kw["num_seqs"], kw["num_query_heads"], kw["head_size"]), dtype)}
    if slug == "mla_decode_attention":
        shape = (kw["batch_size"], kw["nhead"], kw["kv_lora_rank"])
        return "tensor", {"out": (shape, torch.bfloat16)}
    if slug == "reshape_and_cache":
        tokens, heads, dim = kw["shape"]
        shape = (-(-tokens // kw["block_size"]), kw["block_size"], heads, dim)
        return "dict", {
            "key_cache": (shape, torch.bfloat16),
            "value_cache": (shape, torch.bfloat16),
        }
    if slug == "fused_qkv_rope":
        dtype = torch.bfloat16 if kw["dtype"] == "bf16" else torch.float16
        tokens, dim = kw["total_tokens"], kw["head_dim"]
        return "tuple", {
            "0": ((tokens, kw["num_heads"], dim), dtype),
            "1": ((tokens, kw["num_kv_heads"], dim), dtype),
            "2": ((tokens, kw["num_kv_heads"], dim), dtype),
        }
    tokens, dim = kw["token_count"], kw["head_size"]
    return "dict", {
        "q": ((tokens, kw["num_query_heads"] * dim), torch.bfloat16),
        "k": ((tokens, kw["num_kv_heads"] * dim), torch.bfloat16),
    }


def _leaves(output: Any) -> tuple[str, dict[str, torch.Tensor]]:
    if isinstance(output, torch.Tensor):
        return "tensor", {"out": output}
    if isinstance(output, dict):
        return "dict", dict(output)
    assert type(output) is tuple
    return "tuple", {str(i): leaf for i, leaf in enumerate(output)}


@pytest.mark.parametrize(
    "slug, init_kwargs, input_kwargs",
    SMALL_CASES,
    ids=[f"{case[0]}-{i}" for i, case in enumerate(SMALL_CASES)],
)
def test_reference_structure_determinism_and_untouched_inputs(slug, init_kwargs, input_kwargs):
    module = MODULES[slug]
    inputs = _draw(module, 11, **input_kwargs)
    assert set(inputs) == set(_draw(module, 12, **input_kwargs))
    pristine = {name: tensor.clone() for name, tensor in inputs.items()}
    first = _run(module, init_kwargs, inputs)
    second = _run(module, init_kwargs, inputs)
    kind, leaves = _leaves(first)
    want_kind, want = _expected_structure(slug, input_kwargs)
    assert kind == want_kind
    assert list(leaves) == list(want)
    for name, leaf in leaves.items():
        assert (tuple(leaf.shape), leaf.dtype) == want[name], name
        assert torch.isfinite(leaf.float()).all(), name
        assert leaf.is_contiguous(), name
        assert torch.equal(leaf, _leaves(second)[1][name]), name
        for tensor in inputs.values():  # outputs never alias inputs
            assert leaf.untyped_storage().data_ptr() != tensor.untyped_storage().data_ptr()
    for name, tensor in inputs.items():
        assert torch.equal(tensor, pristine[name]), f"forward modified {name}"


@pytest.mark.parametrize("slug", sorted(MODULES))
def test_cheap_published_shapes_run_on_cpu(slug):
    data_dir = require_release()
    shapes = json.loads((data_dir / slug / "shapes.json").read_text())
    ran = 0
    for shape in shapes.values():
        work = MODULES[slug].SPEC.work(shape["init_kwargs"], shape["input_kwargs"])
        if work.q_read + work.q_write > 12_000_000 or sum(work.w_flops.values()) > 1.5e9:
            continue
        inputs = _draw(MODULES[slug], 0, **shape["input_kwargs"])
        _, leaves = _leaves(_run(MODULES[slug], shape["init_kwargs"], inputs))
        assert all(torch.isfinite(leaf.float()).all() for leaf in leaves.values())
        ran += 1
    assert ran >= 1


# --- 3. Independent hand checks ----------------------------------------------------------


def test_attention_forward_matches_float64_loops_over_several_sequences():
    inputs = _draw(attention_forward, 3, seq_lens=[3, 5, 1], num_heads=2, head_dim=8)
    out = _run(attention_forward, None, inputs)
    exact = torch.zeros(out.shape, dtype=torch.float64)
    bounds = [0, 3, 8, 9]
    for i in range(3):
        keys_range = range(bounds[i], bounds[i + 1])
        for h in range(2):
            for row in keys_range:
                exact[row, h] = _softmax_attention_f64(
                    inputs["q"][row, h],
                    [inputs["k"][p, h] for p in keys_range],
                    [inputs["v"][p, h] for p in keys_range],
                    1 / math.sqrt(8),
                )
    _assert_within_one_ulp(out, exact)


def test_attention_forward_is_not_causal_and_keeps_sequences_apart():
    inputs = _draw(attention_forward, 4, seq_lens=[4, 4], num_heads=1, head_dim=8)
    base = _run(attention_forward, None, inputs)
    # Key 3 of sequence 0 dominates every query of sequence 0, the earlier queries too.
    k = inputs["k"].clone()
    k[3, 0] = 8.0
    q = inputs["q"].clone()
    q[0:4, 0] = 1.0
    out = _run(attention_forward, None, {**inputs, "q": q, "k": k})
    for row in range(4):
        assert torch.equal(out[row, 0], inputs["v"][3, 0]), row
    # Sequence 1 never sees sequence 0's keys.
    assert torch.equal(out[4:], base[4:])


def test_attention_forward_empty_query_range_rows_are_zero_and_others_unaffected():
    inputs = _draw(attention_forward, 5, seq_lens=[3, 4], num_heads=2, head_dim=16)
    cu_q = torch.tensor([0, 3, 3], dtype=torch.int32)  # sequence 1 has no queries
    out = _run(attention_forward, None, {**inputs, "cu_seqlens_q": cu_q})
    full = _run(attention_forward, None, inputs)
    assert torch.equal(out[:3], full[:3])
    assert not out[3:].any()


def _unified_f64(inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """Float64 loop; keys read token by token through block_table (documented addressing)."""
    q, k_cache, v_cache = inputs["q"], inputs["k_cache"], inputs["v_cache"]
    bs, hkv = k_cache.shape[1], k_cache.shape[2]
    group = q.shape[1] // hkv
    exact = torch.zeros(q.shape, dtype=torch.float64)
    cu = inputs["cu_seqlens_q"].tolist()
    for s, length in enumerate(inputs["seqused_k"].tolist()):
        n = cu[s + 1] - cu[s]
        for h in range(q.shape[1]):
            kv_head = h // group
            keys, values = [], []
            for p in range(length):
                block = int(inputs["block_table"][s, p // bs])
                keys.append(k_cache[block, p % bs, kv_head])
                values.append(v_cache[block, p % bs, kv_head])
            for i in range(n):
                visible = i + 1 if n == length else length
                exact[cu[s] + i, h] = _softmax_attention_f64(
                    q[cu[s] + i, h], keys[:visible], values[:visible], 1 / math.sqrt(q.shape[2])
                )
    return exact


def _permute_blocks(
    inputs: dict[str, torch.Tensor], table_name: str, cache_names: list[str], seed: int
) -> dict[str, torch.Tensor]:
    """Move every physical cache block to a random new index and remap the table to match."""
    num_blocks = inputs[cache_names[0]].shape[0]
    perm = torch.randperm(num_blocks, generator=torch.Generator().manual_seed(seed))
    moved = dict(inputs)
    for name in cache_names:  # block b moves to perm[b]
        cache = torch.empty_like(inputs[name])
        cache[perm] = inputs[name]
        moved[name] = cache
    table = inputs[table_name].long()
    moved[table_name] = perm[table].to(torch.int32)
    return moved


def test_unified_attention_causal_gqa_block_table_addressing_matches_float64_loops():
    inputs = _draw(
        unified_attention,
        6,
        num_seqs=3,
        seq_lens=[3, 6, 1],
        num_query_heads=4,
        num_kv_heads=2,
        head_size=8,
        block_size=4,
    )
    shuffled = _permute_blocks(inputs, "block_table", ["k_cache", "v_cache"], seed=1)
    assert not torch.equal(shuffled["block_table"], inputs["block_table"])
    out = _run(unified_attention, None, shuffled)
    _assert_within_one_ulp(out, _unified_f64(shuffled))
    assert torch.equal(out, _run(unified_attention, None, inputs))


def test_unified_attention_batches_equal_sequences_as_it_would_loop_over_them(monkeypatch):
    # Seven sequences of 5 tokens (one batch, or four under a budget of two per batch), two
    # of 3 and one of 2 (batches of their own), and one of length 0 (no queries, no rows).
    lengths = [5, 3, 5, 5, 2, 5, 3, 5, 5, 5, 0]
    inputs = _draw(
        unified_attention,
        9,
        num_seqs=len(lengths),
        seq_lens=lengths,
        num_query_heads=4,
        num_kv_heads=2,
        head_size=8,
        block_size=2,
    )
    shuffled = _permute_blocks(inputs, "block_table", ["k_cache", "v_cache"], seed=3)
    whole = _run(unified_attention, None, shuffled)
    _assert_within_one_ulp(whole, _unified_f64(shuffled))
    # A budget of two 5-token sequences per batch: the batches, not the answer, change.
    monkeypatch.setattr(unified_attention, "BATCH_SCORE_ELEMENTS", 2 * 4 * 5 * 5)
    assert torch.equal(_run(unified_attention, None, shuffled), whole)
    # Sequence by sequence through attend_fp32 (a batch of one) gives the same rows.
    cu = shuffled["cu_seqlens_q"].tolist()
    for s, length in enumerate(lengths):
        if length == 0:
            continue
        blocks = shuffled["block_table"][s, : -(-length // 2)].long()
        keys = shuffled["k_cache"][blocks].reshape(-1, 2, 8)[:length]
        values = shuffled["v_cache"][blocks].reshape(-1, 2, 8)[:length]
        one = _attention.attend_fp32(
            shuffled["q"][cu[s] : cu[s + 1]],
            keys,
            values,
            scale=1 / math.sqrt(8),
            causal=True,
            out_dtype=torch.bfloat16,
        )
        assert torch.equal(whole[cu[s] : cu[s + 1]], one), f"sequence {s}"


def test_attend_fp32_many_is_attend_fp32_per_sequence():
    gen = torch.Generator().manual_seed(21)
    q = torch.randn(3, 7, 6, 8, generator=gen).to(torch.bfloat16)
    k = torch.randn(3, 9, 2, 8, generator=gen).to(torch.bfloat16)
    v = torch.randn(3, 9, 2, 4, generator=gen).to(torch.bfloat16)
    for causal in (False, True):
        many = _attention.attend_fp32_many(
            q, k, v, scale=0.3, causal=causal, out_dtype=torch.float32, budget=3 * 6 * 9 * 2
        )
        for s in range(3):
            one = _attention.attend_fp32(
                q[s], k[s], v[s], scale=0.3, causal=causal, out_dtype=torch.float32
            )
            torch.testing.assert_close(many[s], one, rtol=1e-6, atol=1e-6)


def test_unified_attention_causal_mask_hides_later_keys_and_quirk_unmasks_unequal_lengths():
    inputs = _draw(
        unified_attention,
        7,
        num_seqs=1,
        seq_lens=[6],
        num_query_heads=2,
        num_kv_heads=1,
        head_size=16,
        block_size=4,
    )
    base = _run(unified_attention, None, inputs)
    k_cache = inputs["k_cache"].clone()
    # Position 3 is block 0, slot 3; aligned with query 3 of head 0 it dominates that row.
    k_cache[0, 3, 0] = 8.0 * inputs["q"][3, 0].float().sign()
    poisoned = _run(unified_attention, None, {**inputs, "k_cache": k_cache})
    assert torch.equal(poisoned[:3], base[:3])  # queries 0..2 cannot see position 3
    assert torch.equal(poisoned[3, 0], inputs["v_cache"][0, 3, 0])
    # n_s = 4 queries against L_s = 6 keys: no mask at all (the reference's quirk).
    short = {
        **inputs,
        "q": inputs["q"][:4].clone(),
        "cu_seqlens_q": torch.tensor([0, 4], dtype=torch.int32),
    }
    out = _run(unified_attention, None, short)
    _assert_within_one_ulp(out, _unified_f64(short))


def _paged_f64(inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """Float64 loop reading k_cache[β, h, d // x, o, d % x] and v_cache[β, h, d, o]."""
    query, k_cache, v_cache = inputs["query"], inputs["k_cache"], inputs["v_cache"]
    _, hkv, _, bs, vec = k_cache.shape
    dim = query.shape[2]
    group = query.shape[1] // hkv
    exact = torch.zeros(query.shape, dtype=torch.float64)
    for s, length in enumerate(inputs["seq_lens"].tolist()):
        for h in range(query.shape[1]):
            keys, values = [], []
            for p in range(length):
                block = int(inputs["block_tables"][s, p // bs])
                slot = p % bs
                keys.append(
                    torch.tensor(
                        [
                            float(k_cache[block, h // group, d // vec, slot, d % vec])
                            for d in range(dim)
                        ]
                    )
                )
                values.append(
                    torch.tensor([float(v_cache[block, h // group, d, slot]) for d in range(dim)])
                )
            if length > 0:
                exact[s, h] = _softmax_attention_f64(query[s, h], keys, values, 1 / math.sqrt(dim))
    return exact


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_paged_attention_split_key_layout_shuffled_tables_and_lengths(dtype):
    inputs = _draw(
        paged_attention_decode,
        8,
        num_seqs=3,
        ctx_len=10,
        num_query_heads=4,
        num_kv_heads=2,
        head_size=16,
        block_size=4,
        dtype=dtype,
    )
    shuffled = _permute_blocks(inputs, "block_tables", ["k_cache", "v_cache"], seed=2)
    shuffled["seq_lens"] = torch.tensor([10, 0, 5], dtype=torch.int32)
    out = _run(paged_attention_decode, None, shuffled)
    assert not out[1].any()  # L = 0: zeros
    _assert_within_one_ulp(out, _paged_f64(shuffled))


def test_mla_decode_matches_float64_loops_with_shared_latent_and_full_dim_scale():
    inputs = _draw(
        mla_decode_attention,
        9,
        batch_size=2,
        ctx_len=3,
        nhead=3,
        kv_lora_rank=8,
        qk_rope_head_dim=4,
    )
    inputs["seq_lens"] = torch.tensor([2, 4], dtype=torch.int32)  # rows 0-1 and 2-5
    out = _run(mla_decode_attention, {"nhead": 3, "kv_lora_rank": 8, "qk_rope_head_dim": 4}, inputs)
    rows = inputs["kv_cache"][:, 0]
    exact = torch.zeros(out.shape, dtype=torch.float64)
    for b, (lo, hi) in enumerate([(0, 2), (2, 6)]):
        for h in range(3):
            exact[b, h] = _softmax_attention_f64(
                inputs["q"][b, h],
                [rows[p] for p in range(lo, hi)],
                [rows[p][:8] for p in range(lo, hi)],
                1 / math.sqrt(12),
            )
    _assert_within_one_ulp(out, exact)


def test_reshape_and_cache_scatters_by_slot_and_skips_negative_slots():
    inputs = _draw(reshape_and_cache, 10, shape=[5, 2, 3], block_size=4)
    slots = [6, -1, 0, 7, 3]
    inputs["slot_mapping"] = torch.tensor(slots, dtype=torch.int64)
    inputs["value_cache"] = torch.full_like(inputs["value_cache"], 0.5)
    out = _run(reshape_and_cache, None, inputs)
    expected_key = torch.zeros(2, 4, 2, 3, dtype=torch.bfloat16)
    expected_value = torch.full((2, 4, 2, 3), 0.5, dtype=torch.bfloat16)
    for token, slot in enumerate(slots):
        if slot >= 0:
            expected_key[slot // 4, slot % 4] = inputs["key"][token]
            expected_value[slot // 4, slot % 4] = inputs["value"][token]
    assert torch.equal(out["key_cache"], expected_key)
    assert torch.equal(out["value_cache"], expected_value)
    assert reshape_and_cache.SPEC.policy.rtol == 0 and reshape_and_cache.SPEC.policy.atol_scale == 0


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_fused_qkv_rope_matches_float64_neox_rotation_with_bias_at_nonzero_positions(dtype):
    heads, kv_heads, dim, rope = 2, 1, 12, 8
    inputs = _draw(
        fused_qkv_rope,
        13,
        total_tokens=4,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=dim,
        with_bias=True,
        dtype=dtype,
    )
    inputs["positions"] = torch.tensor([0, 1, 7, 300], dtype=torch.int32)
    init = {"num_heads": heads, "num_kv_heads": kv_heads, "head_dim": dim, "rope_dim": rope}
    q, k, v = _run(fused_qkv_rope, init, inputs)
    biased = (inputs["qkv"] + inputs["qkv_bias"]).double()  # one rounding, then exact
    half = rope // 2
    for out, first_col, count in ((q, 0, heads), (k, heads * dim, kv_heads)):
        exact = torch.zeros(out.shape, dtype=torch.float64)
        for t, pos in enumerate(inputs["positions"].tolist()):
            for h in range(count):
                x = biased[t, first_col + h * dim : first_col + (h + 1) * dim]
                exact[t, h] = x
                for a in range(half):
                    # Documented rounding points: fp32 power, fp32 reciprocal, fp32 product.
                    power = torch.tensor(10000.0) ** torch.tensor(2 * a / rope)
                    theta = float(torch.tensor(float(pos)) * (1 / power))
                    exact[t, h, a] = x[a] * math.cos(theta) - x[a + half] * math.sin(theta)
                    exact[t, h, a + half] = x[a + half] * math.cos(theta) + x[a] * math.sin(theta)
        _assert_within_one_ulp(out, exact)
    assert torch.equal(v.reshape(4, -1), (inputs["qkv"] + inputs["qkv_bias"])[:, 36:])


def _mrope_axes(half: int, sections: list[int], interleaved: bool) -> torch.Tensor:
    """Axis map built by slicing, the way the interleaved layout is usually written."""
    axes = torch.zeros(half, dtype=torch.long)
    if interleaved:
        axes[1 : 3 * sections[1] : 3] = 1
        axes[2 : 3 * sections[2] : 3] = 2
    else:
        axes = torch.repeat_interleave(torch.arange(3), torch.tensor(sections))
    return axes


@pytest.mark.parametrize(
    "interleaved, neox", [(False, True), (True, True), (False, False), (True, False)]
)
def test_mrope_matches_float64_rotation_for_each_layout(interleaved, neox):
    heads, kv_heads, dim, rd, sections = 2, 1, 20, 16, [2, 3, 3]
    inputs = _draw(
        mrope,
        14,
        token_count=3,
        num_query_heads=heads,
        num_kv_heads=kv_heads,
        head_size=dim,
        rotary_dim=rd,
    )
    init = {
        "head_size": dim,
        "rotary_dim": rd,
        "mrope_section": sections,
        "mrope_interleaved": interleaved,
        "is_neox_style": neox,
    }
    out = _run(mrope, init, inputs)
    axes = _mrope_axes(rd // 2, sections, interleaved)
    for name, count in (("q", heads), ("k", kv_heads)):
        x_all = inputs[name].double().view(3, count, dim)
        exact = x_all.clone()
        for t in range(3):
            for f in range(rd // 2):
                c = float(inputs["cos"][axes[f], t, f])
                s = float(inputs["sin"][axes[f], t, f])
                i, j = (f, f + rd // 2) if neox else (2 * f, 2 * f + 1)
                exact[t, :, i] = x_all[t, :, i] * c - x_all[t, :, j] * s
                exact[t, :, j] = x_all[t, :, j] * c + x_all[t, :, i] * s
        _assert_within_one_ulp(out[name], exact.view(3, count * dim))
        assert torch.equal(
            out[name].view(3, count, dim)[..., rd:], inputs[name].view(3, count, dim)[..., rd:]
        )


def test_mrope_axis_maps_differ_between_layouts():
    assert mrope.section_axes(8, [2, 3, 3], False) == [0, 0, 1, 1, 1, 2, 2, 2]
    assert mrope.section_axes(8, [2, 3, 3], True) == [0, 1, 2, 0, 1, 2, 0, 1]


def test_query_blocking_and_gqa_do_not_change_the_result():
    gen = torch.Generator().manual_seed(15)
    q = torch.randn(37, 6, 8, generator=gen).to(torch.bfloat16)
    k = torch.randn(37, 2, 8, generator=gen).to(torch.bfloat16)
    v = torch.randn(37, 2, 8, generator=gen).to(torch.bfloat16)
    for causal in (False, True):
        whole = _attention.attend_fp32(q, k, v, scale=0.3, causal=causal, out_dtype=torch.float32)
        blocked = _attention.attend_fp32(
            q, k, v, scale=0.3, causal=causal, out_dtype=torch.float32, budget=6 * 37 * 5
        )
        torch.testing.assert_close(blocked, whole, rtol=1e-6, atol=1e-6)
        # Query head h reads KV head h // 3: the same as repeating KV heads explicitly.
        repeated = _attention.attend_fp32(
            q,
            k.repeat_interleave(3, dim=1),
            v.repeat_interleave(3, dim=1),
            scale=0.3,
            causal=causal,
            out_dtype=torch.float32,
        )
        torch.testing.assert_close(repeated, whole, rtol=1e-6, atol=1e-6)


def _policy_failure_share(reference: torch.Tensor, candidate: torch.Tensor, policy) -> float:
    """Share of elements outside atol + rtol·|ref| (atol = atol_scale·max|ref|), as base.py says."""
    ref, cand = reference.double(), candidate.double()
    atol = max(policy.atol_floor, policy.atol_scale * float(ref.abs().max()))
    return float(((cand - ref).abs() > atol + policy.rtol * ref.abs()).double().mean())


def test_attention_policy_passes_a_bf16_flash_style_kernel_and_fails_wrong_answers():
    for module in (
        attention_forward,
        unified_attention,
        paged_attention_decode,
        mla_decode_attention,
    ):
        assert module.SPEC.policy is _attention.ATTENTION_POLICY
        assert module.CHECKER_NOTES.startswith(_attention.ATTENTION_CHECKER_NOTES)
    policy = _attention.ATTENTION_POLICY
    inputs = _draw(attention_forward, 16, seq_lens=[700], num_heads=2, head_dim=72)
    reference = _run(attention_forward, None, inputs)
    # Flash-style: unnormalised probabilities rounded to bf16 before P·V, fp32 accumulators.
    q, k, v = (inputs[name].float().transpose(0, 1) for name in "qkv")
    scores = q @ k.transpose(1, 2) / math.sqrt(72)
    weights = torch.exp(scores - scores.amax(-1, keepdim=True))
    flash = (weights.to(torch.bfloat16).float() @ v) / weights.sum(-1, keepdim=True)
    flash = flash.transpose(0, 1).to(torch.bfloat16)
    assert _policy_failure_share(reference, flash, policy) <= policy.max_mismatch_share
    assert _policy_failure_share(reference, reference * 1.02, policy) > 0.01
    dropped_head = reference.clone()
    dropped_head[:, 1] = 0
    assert _policy_failure_share(reference, dropped_head, policy) > 0.1


# --- 4. Input generation -----------------------------------------------------------------


def _replay(seed: int, draws: list[tuple[tuple[int, ...], torch.dtype]]) -> list[torch.Tensor]:
    """The documented draws, made one after another from one generator seeded once."""
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, dtype=dtype, generator=gen) for shape, dtype in draws]


def test_attention_forward_inputs_follow_the_documented_draws():
    inputs = _draw(attention_forward, 21, seq_lens=[3, 5], num_heads=2, head_dim=72)
    q, k, v = _replay(21, [((8, 2, 72), torch.bfloat16)] * 3)
    assert torch.equal(inputs["q"], q) and torch.equal(inputs["k"], k)
    assert torch.equal(inputs["v"], v)
    for name in ("cu_seqlens_q", "cu_seqlens_k"):
        assert inputs[name].dtype == torch.int32 and inputs[name].tolist() == [0, 3, 8]
    assert inputs["cu_seqlens_q"].data_ptr() != inputs["cu_seqlens_k"].data_ptr()


def test_unified_attention_inputs_follow_the_documented_draws_and_tables():
    inputs = _draw(
        unified_attention,
        22,
        num_seqs=2,
        seq_lens=[5, 17],
        num_query_heads=4,
        num_kv_heads=2,
        head_size=8,
        block_size=4,
    )
    max_blocks, num_blocks = 5 + 2, 2 * 7 + 64
    cache = ((num_blocks, 4, 2, 8), torch.bfloat16)
    q, k_cache, v_cache = _replay(22, [((22, 4, 8), torch.bfloat16), cache, cache])
    assert torch.equal(inputs["q"], q) and torch.equal(inputs["k_cache"], k_cache)
    assert torch.equal(inputs["v_cache"], v_cache)
    assert inputs["block_table"].dtype == torch.int32
    assert inputs["block_table"].tolist() == [[0, 1, 0, 0, 0, 0, 0], [7, 8, 9, 10, 11, 0, 0]]
    assert inputs["block_table"].shape[1] == max_blocks
    assert inputs["cu_seqlens_q"].tolist() == [0, 5, 22]
    assert inputs["seqused_k"].tolist() == [5, 17]
    with pytest.raises(ValueError):
        _draw(
            unified_attention,
            22,
            num_seqs=3,
            seq_lens=[5, 17],
            num_query_heads=4,
            num_kv_heads=2,
            head_size=8,
            block_size=4,
        )


@pytest.mark.parametrize("dtype, torch_dtype", [("bf16", torch.bfloat16), ("fp16", torch.float16)])
def test_paged_attention_inputs_follow_the_documented_draws(dtype, torch_dtype):
    inputs = _draw(
        paged_attention_decode,
        23,
        num_seqs=2,
        ctx_len=20,
        num_query_heads=4,
        num_kv_heads=2,
        head_size=32,
        block_size=16,
        dtype=dtype,
    )
    num_blocks = 2 * 2 + 16
    query, k_cache, v_cache = _replay(
        23,
        [
            ((2, 4, 32), torch_dtype),
            ((num_blocks, 2, 4, 16, 8), torch_dtype),
            ((num_blocks, 2, 32, 16), torch_dtype),
        ],
    )
    assert torch.equal(inputs["query"], query) and torch.equal(inputs["k_cache"], k_cache)
    assert torch.equal(inputs["v_cache"], v_cache)
    assert inputs["block_tables"].tolist() == [[0, 1], [2, 3]]
    assert inputs["seq_lens"].tolist() == [20, 20]
    assert inputs["block_tables"].dtype == inputs["seq_lens"].dtype == torch.int32


def test_mla_inputs_follow_the_documented_draws():
    inputs = _draw(
        mla_decode_attention,
        24,
        batch_size=2,
        ctx_len=5,
        nhead=3,
        kv_lora_rank=8,
        qk_rope_head_dim=4,
    )
    q, kv = _replay(24, [((2, 3, 12), torch.bfloat16), ((10, 1, 12), torch.bfloat16)])
    assert torch.equal(inputs["q"], q) and torch.equal(inputs["kv_cache"], kv)
    assert inputs["seq_lens"].dtype == torch.int32 and inputs["seq_lens"].tolist() == [5, 5]


def test_reshape_and_cache_inputs_follow_the_documented_draws():
    inputs = _draw(reshape_and_cache, 25, shape=[17, 2, 8])
    key, value = _replay(25, [((17, 2, 8), torch.bfloat16)] * 2)
    assert torch.equal(inputs["key"], key) and torch.equal(inputs["value"], value)
    for name in ("key_cache", "value_cache"):
        assert inputs[name].shape == (2, 16, 2, 8) and not inputs[name].any()
        assert inputs[name].dtype == torch.bfloat16
    assert inputs["slot_mapping"].dtype == torch.int64
    assert inputs["slot_mapping"].tolist() == list(range(17))


def test_fused_qkv_rope_inputs_draw_bias_after_qkv_at_one_hundredth_scale():
    inputs = _draw(
        fused_qkv_rope,
        26,
        total_tokens=64,
        num_heads=4,
        num_kv_heads=2,
        head_dim=32,
        with_bias=True,
        dtype="fp16",
    )
    qkv, bias = _replay(26, [((64, 256), torch.float16), ((256,), torch.float16)])
    assert torch.equal(inputs["qkv"], qkv)
    assert torch.equal(inputs["qkv_bias"], bias * 0.01)
    assert 0.007 < inputs["qkv_bias"].float().std() < 0.013
    assert inputs["positions"].dtype == torch.int32
    assert inputs["positions"].tolist() == list(range(64))
    plain = _draw(fused_qkv_rope, 26, total_tokens=64, num_heads=4, num_kv_heads=2, head_dim=32)
    assert set(plain) == {"qkv", "positions"} and plain["qkv"].dtype == torch.bfloat16


def test_mrope_inputs_follow_the_documented_draws_and_scales():
    inputs = _draw(
        mrope, 27, token_count=50, num_query_heads=4, num_kv_heads=2, head_size=32, rotary_dim=32
    )
    q, k, alpha = _replay(
        27, [((50, 128), torch.bfloat16), ((50, 64), torch.bfloat16), ((3, 50, 16), torch.float32)]
    )
    assert torch.equal(inputs["q"], q * 0.02) and torch.equal(inputs["k"], k * 0.02)
    assert torch.equal(inputs["cos"], torch.cos(alpha * 0.1))
    assert torch.equal(inputs["sin"], torch.sin(alpha * 0.1))
    assert inputs["cos"].dtype == torch.float32 and inputs["cos"].shape == (3, 50, 16)
    assert 0.015 < inputs["q"].float().std() < 0.025
    angle = torch.atan2(inputs["sin"], inputs["cos"])
    assert 0.08 < angle.std() < 0.12


@pytest.mark.parametrize(
    "slug, init_kwargs, input_kwargs", SMALL_CASES[::2], ids=[case[0] for case in SMALL_CASES[::2]]
)
def test_same_seed_same_inputs_other_seed_other_inputs(slug, init_kwargs, input_kwargs):
    module = MODULES[slug]
    first, again, other = (_draw(module, seed, **input_kwargs) for seed in (31, 31, 32))
    assert all(torch.equal(first[name], again[name]) for name in first)
    random_names = [name for name in first if first[name].is_floating_point() and first[name].any()]
    assert random_names
    assert all(not torch.equal(first[name], other[name]) for name in random_names)
