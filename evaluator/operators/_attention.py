"""Shared pieces of the attention-family references: fp32 softmax attention of one sequence.

The references of ``attention_forward``, ``unified_attention``, ``paged_attention_decode``
and ``mla_decode_attention`` all reduce, per sequence, to: upcast the sequence's queries,
keys and values to fp32, scores = q·kᵀ·scale, optional causal mask, row softmax, weighted
sum of values, one rounding to the output dtype. :func:`attend_fp32` does that, vectorised
over heads (grouped-query head map q̃ → ⌊q̃ / (Hq/Hkv)⌋) and looped over query blocks so
that the fp32 score matrix of one block stays below a fixed element budget (the longest
published sequence, 65,556 tokens × 16 heads, would need 275 GB in one piece).
:func:`attend_fp32_many` is the same computation for a batch of sequences of equal lengths
(one sequence is a batch of one), so that a reference over thousands of short sequences
launches a few kernels per batch rather than a few per sequence.
"""

from __future__ import annotations

import math

import torch

from evaluator.operators.base import CorrectnessPolicy

# BF16_POLICY plus a mismatch allowance of 1e-4 of the elements. Measured on an H200 (torch
# 2.11) over all 46 published attention_forward and unified_attention shapes: PyTorch's bf16
# flash SDPA (P rounded to bf16 before P·V) is within 7e-3·max|ref| everywhere, but up to
# 1.4e-5 of its elements (those near zero) fall outside BF16_POLICY's 1e-3·max|ref| +
# 2^-6·|ref|, so with no allowance an honest flash kernel fails 11 of the 21
# attention_forward shapes. An allowance, unlike a larger atol, still fails an answer scaled
# by 1.02 and any error that touches a whole head or sequence.
ATTENTION_POLICY = CorrectnessPolicy(rtol=2.0**-6, atol_scale=1e-3, max_mismatch_share=1e-4)

ATTENTION_CHECKER_NOTES = """\
ATTENTION_POLICY (BF16_POLICY's rtol 2^-6 and atol 1e-3·max|ref|, plus at most 1e-4 of the
elements of a leaf outside it). Measured: PyTorch's bf16 flash SDPA against this fp32
reference stays within 7e-3·max|ref|, with up to 1.4e-5 of the elements (near-zero ones)
outside BF16_POLICY; with max_mismatch_share 0 it fails 11 of 21 attention_forward shapes.
Known blind spot of the allowance: an error confined to under 1e-4 of the elements (e.g. one
dropped query row of a 65,556-token sequence) passes; validation variants with short
sequences close it. Run the reference with TF32 matmuls off (torch's default).
"""

# At most this many fp32 score elements per query block (1 GiB); softmax needs a second
# buffer of the same size, so one block peaks at about 2-3 GiB on top of the inputs.
SCORE_BUDGET_ELEMENTS = 1 << 28

# Sequences batched into one attend_fp32_many call hold at most this many fp32 score
# elements (64 MiB): enough work per kernel to keep a GPU busy, small enough for a CPU's
# caches (one batch of 2^28 ran 2.7x slower than a loop over sequences on this CPU).
BATCH_SCORE_ELEMENTS = 1 << 24


def _query_block_rows(num_query_heads: int, num_keys: int, budget: int) -> int:
    """Rows of queries per block so that heads × rows × keys stays within ``budget``."""
    return max(1, budget // max(1, num_query_heads * num_keys))


def attend_fp32(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    scale: float,
    causal: bool,
    out_dtype: torch.dtype,
    budget: int = SCORE_BUDGET_ELEMENTS,
) -> torch.Tensor:
    """Softmax attention of one sequence in fp32, rounded once to ``out_dtype``.

    ``q`` is (n, Hq, Dk); ``k`` is (L, Hkv, Dk); ``v`` is (L, Hkv, Dv); Hkv divides Hq and
    query head ``h`` reads KV head ``h // (Hq // Hkv)``. Scores are ``(q·kᵀ) * scale`` in
    fp32 on exactly upcast inputs. With ``causal`` local query row ``i`` sees key positions
    ``p <= i`` (the mask is aligned to the start, which is what the callers need when
    n = L); otherwise every key is visible. With L = 0 the result is zeros. Returns
    (n, Hq, Dv) in ``out_dtype``.
    """
    return attend_fp32_many(
        q[None], k[None], v[None], scale=scale, causal=causal, out_dtype=out_dtype, budget=budget
    )[0]


def attend_fp32_many(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    scale: float,
    causal: bool,
    out_dtype: torch.dtype,
    budget: int = SCORE_BUDGET_ELEMENTS,
) -> torch.Tensor:
    """:func:`attend_fp32` of S sequences of equal lengths at once: (S, n, Hq, Dv).

    ``q`` is (S, n, Hq, Dk), ``k`` (S, L, Hkv, Dk) and ``v`` (S, L, Hkv, Dv); sequence ``s``
    attends only to its own keys. One batched matmul per query block covers every sequence
    and KV head, so a batch of many short sequences costs a few kernel launches instead of a
    few per sequence. The query blocks hold S × Hq × rows × L ≤ ``budget`` score elements (at
    least one row): a caller batching sequences keeps S × Hq × L within the budget.
    """
    seqs, num_queries, num_query_heads, head_dim = q.shape
    num_keys, num_kv_heads, value_dim = v.shape[1:]
    if num_kv_heads == 0 or num_query_heads % num_kv_heads != 0:
        raise ValueError(
            f"{num_query_heads} query heads are not a multiple of {num_kv_heads} KV heads"
        )
    group = num_query_heads // num_kv_heads
    out = torch.zeros(
        (seqs, num_queries, num_query_heads, value_dim), dtype=out_dtype, device=q.device
    )
    if seqs == 0 or num_queries == 0 or num_keys == 0:
        return out
    # (S·Hkv, D, L) and (S·Hkv, L, Dv): one batched matmul over sequences and KV heads, no
    # copy per query head.
    keys_t = k.float().permute(0, 2, 3, 1).reshape(seqs * num_kv_heads, head_dim, num_keys)
    values = v.float().permute(0, 2, 1, 3).reshape(seqs * num_kv_heads, num_keys, value_dim)
    rows = _query_block_rows(seqs * num_query_heads, num_keys, budget)
    for start in range(0, num_queries, rows):
        stop = min(num_queries, start + rows)
        block = stop - start
        # Causal: rows start..stop-1 never see keys at or beyond `stop`.
        visible = min(num_keys, stop) if causal else num_keys
        # (S, n_b, Hkv, g, D) -> (S·Hkv, g·n_b, D); query head kv·g + j of sequence s sits
        # at [s·Hkv + kv, j·n_b + row].
        q_block = (
            q[:, start:stop]
            .float()
            .view(seqs, block, num_kv_heads, group, head_dim)
            .permute(0, 2, 3, 1, 4)
            .reshape(seqs * num_kv_heads, group * block, head_dim)
        )
        scores = torch.bmm(q_block, keys_t[:, :, :visible])
        scores.mul_(scale)
        if causal:
            positions = torch.arange(visible, device=q.device)
            query_pos = torch.arange(start, stop, device=q.device)
            masked = positions.view(1, visible) > query_pos.view(block, 1)
            scores.view(seqs * num_kv_heads, group, block, visible).masked_fill_(masked, -math.inf)
        probs = torch.softmax(scores, dim=-1)
        del scores
        o_block = torch.bmm(probs, values[:, :visible])  # (S·Hkv, g·n_b, Dv)
        del probs
        out[:, start:stop] = (
            o_block.view(seqs, num_kv_heads, group, block, value_dim)
            .permute(0, 3, 1, 2, 4)
            .reshape(seqs, block, num_query_heads, value_dim)
            .to(out_dtype)
        )
    return out


def inverse_sqrt(dim: int) -> float:
    """The default attention scale 1/√dim (as a Python float)."""
    return 1.0 / math.sqrt(dim)
