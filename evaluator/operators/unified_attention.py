"""``unified_attention`` (atrex_030): vLLM V1 paged attention over a flash-layout KV cache.

Sequence s owns query rows cu_seqlens_q[s] … cu_seqlens_q[s+1]−1 (n_s rows) and KV
positions p < L_s = seqused_k[s], stored at block β = block_table[s, ⌊p/bs⌋], slot
o = p mod bs: k_cache[β, o, h, :] and v_cache[β, o, h, :]. Query head q̃ reads KV head
⌊q̃/(Hq/Hkv)⌋. In fp32 on upcast inputs: scores = q·k/√D, softmax, weighted sum of values,
rounded to bf16 (the query's dtype).

Mask quirk (kept on purpose, as the upstream reference does): when n_s = L_s the mask is
causal and aligned to the start (local query i sees positions p ≤ i); when n_s ≠ L_s there
is **no mask at all** (vLLM itself would align the causal mask to the end; no published
shape has n_s ≠ L_s). Sequences with n_s = 0 are skipped; a sequence with queries but
L_s = 0 gives zeros. Only the block-table entries j < ceil(L_s/bs) are read, so the table's
padding (zeros) and the cache's unused blocks never matter.

Departures from upstream: none (no fp8 here). The reference gathers each sequence's blocks
and attends sequences of equal (n_s, L_s) together, in batches and query blocks of bounded
score memory (docs/decisions.md 4); only fp32 summation order differs from a block-by-block
loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from evaluator.operators._attention import (
    ATTENTION_CHECKER_NOTES,
    ATTENTION_POLICY,
    BATCH_SCORE_ELEMENTS,
    attend_fp32_many,
    inverse_sqrt,
)
from evaluator.operators.base import OperatorSpec, Work, randn_bf16

CHECKER_NOTES = (
    ATTENTION_CHECKER_NOTES
    + """\
Every published shape has n_s = L_s (causal prefill). Validation variants should shuffle the
physical blocks (permute k_cache/v_cache blocks and remap block_table consistently: the
reference output is unchanged) so that a kernel ignoring block_table fails; a variant with
n_s ≠ L_s would test the reference's no-mask quirk, which is not what vLLM does, so it should
not be used to judge candidates.
"""
)


class Model(nn.Module):
    """Per sequence: rnd_bf16(softmax(q kᵀ/√D [causal iff n_s = L_s]) v), KV via block_table."""

    def forward(
        self,
        q: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        cu_seqlens_q: torch.Tensor,
        seqused_k: torch.Tensor,
        block_table: torch.Tensor,
    ) -> torch.Tensor:
        """(T, Hq, D) in q's dtype; rows of sequences without queries stay zero."""
        scale = inverse_sqrt(q.shape[-1])
        out = torch.zeros(q.shape[:-1] + v_cache.shape[-1:], dtype=q.dtype, device=q.device)
        bounds = [int(b) for b in cu_seqlens_q.tolist()]
        used = [int(length) for length in seqused_k.tolist()]
        # Sequences with the same (n_s, L_s) are attended together, in batches whose scores
        # stay within BATCH_SCORE_ELEMENTS; a sequence with queries but no keys stays zero.
        groups: dict[tuple[int, int], list[int]] = {}
        for s, kv_len in enumerate(used):
            n_queries = bounds[s + 1] - bounds[s]
            if n_queries > 0 and kv_len > 0:
                groups.setdefault((n_queries, kv_len), []).append(s)
        heads = q.shape[1]
        for (n_queries, kv_len), seqs in groups.items():
            per_batch = max(1, BATCH_SCORE_ELEMENTS // (heads * n_queries * kv_len))
            for first in range(0, len(seqs), per_batch):
                batch = seqs[first : first + per_batch]
                rows = _query_rows(bounds, batch, n_queries, q.device)
                keys, values = _gather_kv(k_cache, v_cache, block_table, batch, kv_len)
                attended = attend_fp32_many(
                    q.index_select(0, rows).view(len(batch), n_queries, *q.shape[1:]),
                    keys,
                    values,
                    scale=scale,
                    causal=n_queries == kv_len,
                    out_dtype=q.dtype,
                )
                out.index_copy_(0, rows, attended.view(rows.numel(), *out.shape[1:]))
        return out


def _query_rows(
    bounds: list[int], seqs: list[int], n_queries: int, device: torch.device
) -> torch.Tensor:
    """Row indices of the queries of ``seqs`` (each n_queries rows from its bound), in order."""
    starts = torch.tensor([bounds[s] for s in seqs], dtype=torch.long, device=device)
    return (starts.view(-1, 1) + torch.arange(n_queries, device=device)).view(-1)


def _gather_kv(
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_table: torch.Tensor,
    seqs: list[int],
    kv_len: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Positions p < kv_len of each of ``seqs`` from the (NB, bs, H, D) caches: (S, L, H, D).

    Only the table entries j < ceil(kv_len / bs) are read; a table with fewer columns gives
    fewer positions, as reading it sequence by sequence would.
    """
    block_size = k_cache.shape[1]
    num_blocks = -(-kv_len // block_size)
    index = torch.tensor(seqs, dtype=torch.long, device=block_table.device)
    blocks = block_table.index_select(0, index)[:, :num_blocks].long().reshape(-1)
    positions = min(kv_len, (blocks.numel() // len(seqs)) * block_size)

    def gather(cache: torch.Tensor) -> torch.Tensor:
        rows = cache.index_select(0, blocks).view(len(seqs), -1, *cache.shape[2:])
        return rows[:, :positions]

    return gather(k_cache), gather(v_cache)


def make_inputs(
    *,
    device: torch.device,
    generator: torch.Generator,
    num_seqs: int,
    seq_lens: list[int],
    num_query_heads: int,
    num_kv_heads: int,
    head_size: int,
    block_size: int,
) -> dict[str, torch.Tensor]:
    """q (T, Hq, D), k_cache and v_cache (NB, bs, Hkv, D): N(0,1) bf16 in that order.

    MB = ceil(max L / bs) + 2 table columns, NB = S·MB + 64 cache blocks; row s of the
    table holds s·MB + j for j < ceil(L_s/bs) and 0 after; cu_seqlens_q = prefix sums of
    L_s and seqused_k = L_s (int32). S is len(seq_lens), which must equal num_seqs.
    """
    lengths = [int(length) for length in seq_lens]
    if len(lengths) != int(num_seqs):
        raise ValueError(f"num_seqs={num_seqs} but {len(lengths)} seq_lens given")
    seqs, bs = len(lengths), int(block_size)
    max_blocks = -(-max(lengths, default=0) // bs) + 2
    num_blocks = seqs * max_blocks + 64
    tokens = sum(lengths)
    q = randn_bf16(
        (tokens, int(num_query_heads), int(head_size)), device=device, generator=generator
    )
    cache_shape = (num_blocks, bs, int(num_kv_heads), int(head_size))
    k_cache = randn_bf16(cache_shape, device=device, generator=generator)
    v_cache = randn_bf16(cache_shape, device=device, generator=generator)
    bounds = [0]
    for length in lengths:
        bounds.append(bounds[-1] + length)
    table = torch.zeros((seqs, max_blocks), dtype=torch.int32)
    for s, length in enumerate(lengths):
        used = -(-length // bs)
        table[s, :used] = torch.arange(s * max_blocks, s * max_blocks + used, dtype=torch.int32)
    return {
        "q": q,
        "k_cache": k_cache,
        "v_cache": v_cache,
        "cu_seqlens_q": torch.tensor(bounds, dtype=torch.int32, device=device),
        "seqused_k": torch.tensor(lengths, dtype=torch.int32, device=device),
        "block_table": table.to(device),
    }


def work(init_kwargs: Mapping[str, Any], input_kwargs: Mapping[str, Any]) -> Work:
    """W = 2·Hq·D·Σ L(L+1) (causal pairs only); Q counts only used KV tokens and table entries.

    Q_read = 2·T·Hq·D + 4·T·Hkv·D + 4·(S+1) + 4·S + 4·Σ ceil(L/bs); Q_write = 2·T·Hq·D.
    """
    lengths = [int(length) for length in input_kwargs["seq_lens"]]
    hq, hkv = int(input_kwargs["num_query_heads"]), int(input_kwargs["num_kv_heads"])
    dim, bs = int(input_kwargs["head_size"]), int(input_kwargs["block_size"])
    tokens, seqs = sum(lengths), len(lengths)
    table_entries = sum(-(-n // bs) for n in lengths)
    return Work(
        w_flops={"bf16": 2 * hq * dim * sum(n * (n + 1) for n in lengths)},
        q_read=(
            2 * tokens * hq * dim
            + 4 * tokens * hkv * dim
            + 4 * (seqs + 1)
            + 4 * seqs
            + 4 * table_entries
        ),
        q_write=2 * tokens * hq * dim,
    )


SPEC = OperatorSpec(
    slug="unified_attention",
    atrex_id="atrex_030",
    model_class=Model,
    input_maker=make_inputs,
    work_model=work,
    policy=ATTENTION_POLICY,
    dtype="bf16",
    phase="prefill/decode",
)
