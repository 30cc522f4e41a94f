"""``paged_attention_decode`` (atrex_024): one-query decode attention, vLLM v0 split-key cache.

Token p of sequence s lives in block β = block_tables[s, ⌊p/bs⌋] at slot o = p mod bs.
Key element d of KV head h is k_cache[β, h, ⌊d/x⌋, o, d mod x] (x = 16 bytes / element
size = 8 for bf16 and fp16); value element d is v_cache[β, h, d, o]. Query head q̃ reads KV
head ⌊q̃/(Hq/Hkv)⌋. In fp32 on upcast inputs: scores over p < L_s = query·key/√D, softmax,
weighted sum of values, rounded to the query's dtype. Sequences with L_s ≤ 0 give zeros.
No ALiBi, soft-cap or sliding window.

Departures from upstream: none (no fp8 here).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from evaluator.operators._attention import (
    ATTENTION_CHECKER_NOTES,
    ATTENTION_POLICY,
    attend_fp32,
    inverse_sqrt,
)
from evaluator.operators.base import OperatorSpec, Work

CHECKER_NOTES = (
    ATTENTION_CHECKER_NOTES
    + """\
Output dtype is bf16 or fp16 (the shape's `dtype`); ATTENTION_POLICY for both (a kernel that
rounds P to fp16 is well inside it). Published block tables are sequential and the 16 spare
blocks are never referenced: validation variants should permute the physical blocks
(k_cache/v_cache along dim 0, block_tables remapped; reference output unchanged) and vary
seq_lens per sequence (zeros for L ≤ 0), so that a kernel ignoring block_tables or seq_lens
fails.
"""
)

_DTYPES = {"bf16": torch.bfloat16}


def gather_keys(k_cache: torch.Tensor, blocks: torch.Tensor, length: int) -> torch.Tensor:
    """Keys p < length from a (NB, Hkv, D/x, bs, x) cache as (length, Hkv, D)."""
    gathered = k_cache.index_select(0, blocks)  # (nblk, Hkv, D/x, bs, x)
    nblk, heads, splits, block_size, vec = gathered.shape
    # -> (nblk, bs, Hkv, D/x, x): element d = split·x + lane, token = block·bs + slot.
    tokens = gathered.permute(0, 3, 1, 2, 4).reshape(nblk * block_size, heads, splits * vec)
    return tokens[:length]


def gather_values(v_cache: torch.Tensor, blocks: torch.Tensor, length: int) -> torch.Tensor:
    """Values p < length from a (NB, Hkv, D, bs) cache as (length, Hkv, D)."""
    gathered = v_cache.index_select(0, blocks)  # (nblk, Hkv, D, bs)
    nblk, heads, dim, block_size = gathered.shape
    return gathered.permute(0, 3, 1, 2).reshape(nblk * block_size, heads, dim)[:length]


class Model(nn.Module):
    """out[s] = rnd_dt(softmax(query[s]·Kᵀ/√D) V) over the sequence's paged tokens, fp32 inside."""

    def forward(
        self,
        query: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        block_tables: torch.Tensor,
        seq_lens: torch.Tensor,
    ) -> torch.Tensor:
        """(S, Hq, D) in the query's dtype."""
        block_size = v_cache.shape[-1]
        scale = inverse_sqrt(query.shape[-1])
        out = torch.zeros(
            query.shape[:-1] + v_cache.shape[2:3], dtype=query.dtype, device=query.device
        )
        for s, length in enumerate(int(n) for n in seq_lens.tolist()):
            if length <= 0:
                continue
            blocks = block_tables[s, : -(-length // block_size)].long()
            keys = gather_keys(k_cache, blocks, length)
            values = gather_values(v_cache, blocks, length)
            out[s : s + 1] = attend_fp32(
                query[s : s + 1], keys, values, scale=scale, causal=False, out_dtype=query.dtype
            )
        return out


def make_inputs(
    *,
    device: torch.device,
    generator: torch.Generator,
    num_seqs: int,
    ctx_len: int,
    num_query_heads: int,
    num_kv_heads: int,
    head_size: int,
    block_size: int = 16,
    dtype: str = "bf16",
) -> dict[str, torch.Tensor]:
    """query (S, Hq, D), k_cache (NB, Hkv, D/x, bs, x), v_cache (NB, Hkv, D, bs): N(0,1).

    Drawn in that order in bf16 (dtype "bf16") or fp16 (anything else); x = 16 / element
    size; MB = ceil(L/bs), NB = S·MB + 16 (16 spare blocks never referenced);
    block_tables[s, j] = s·MB + j and seq_lens = L (int32).
    """
    torch_dtype = _DTYPES.get(dtype, torch.float16)
    seqs, length, bs = int(num_seqs), int(ctx_len), int(block_size)
    hq, hkv, dim = int(num_query_heads), int(num_kv_heads), int(head_size)
    vec = 16 // torch.empty((), dtype=torch_dtype).element_size()
    max_blocks = -(-length // bs)
    num_blocks = seqs * max_blocks + 16

    def draw(shape: tuple[int, ...]) -> torch.Tensor:
        return torch.randn(shape, dtype=torch_dtype, device=device, generator=generator)

    query = draw((seqs, hq, dim))
    k_cache = draw((num_blocks, hkv, dim // vec, bs, vec))
    v_cache = draw((num_blocks, hkv, dim, bs))
    block_tables = torch.arange(seqs * max_blocks, dtype=torch.int32, device=device).view(
        seqs, max_blocks
    )
    seq_lens = torch.full((seqs,), length, dtype=torch.int32, device=device)
    return {
        "query": query,
        "k_cache": k_cache,
        "v_cache": v_cache,
        "block_tables": block_tables,
        "seq_lens": seq_lens,
    }


def work(init_kwargs: Mapping[str, Any], input_kwargs: Mapping[str, Any]) -> Work:
    """W = S·(4·Hq·L·D + 2·L) (key bf16 for every dtype); Q counts the whole caches.

    Q_read = 2·S·Hq·D + 4·NB·Hkv·D·bs + 4·S·MB + 4·S; Q_write = 2·S·Hq·D (2-byte dtypes).
    """
    seqs, length = int(input_kwargs["num_seqs"]), int(input_kwargs["ctx_len"])
    hq, hkv = int(input_kwargs["num_query_heads"]), int(input_kwargs["num_kv_heads"])
    dim, bs = int(input_kwargs["head_size"]), int(input_kwargs.get("block_size", 16))
    max_blocks = -(-length // bs)
    num_blocks = seqs * max_blocks + 16
    return Work(
        w_flops={"bf16": seqs * (4 * hq * length * dim + 2 * length)},
        q_read=(
            2 * seqs * hq * dim + 4 * num_blocks * hkv * dim * bs + 4 * seqs * max_blocks + 4 * seqs
        ),
        q_write=2 * seqs * hq * dim,
    )


SPEC = OperatorSpec(
    slug="paged_attention_decode",
    atrex_id="atrex_024",
    model_class=Model,
    input_maker=make_inputs,
    work_model=work,
    policy=ATTENTION_POLICY,
    dtype="bf16",
    phase="decode",
)
