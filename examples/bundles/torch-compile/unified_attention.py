"""torch.compile baseline for ``unified_attention`` (the reference's arithmetic).

On CUDA the forward runs through ``torch.compile`` (inductor); on CPU it runs eagerly (see
the bundle's README). A baseline, not a submission: the harness counts inductor kernels and
PyTorch ops as fallback.
"""

from __future__ import annotations

import functools
import math

import torch
from torch import nn


def _gather_blocks(cache: torch.Tensor, blocks: torch.Tensor, length: int) -> torch.Tensor:
    """Rows p < length of one sequence from a (NB, bs, H, D) cache: (length, H, D)."""
    gathered = cache.index_select(0, blocks)  # (nblk, bs, H, D)
    return gathered.reshape(-1, *cache.shape[2:])[:length]


SCORE_BUDGET_ELEMENTS = 1 << 28


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
    num_queries, num_query_heads, head_dim = q.shape
    num_keys, num_kv_heads, value_dim = v.shape
    if num_kv_heads == 0 or num_query_heads % num_kv_heads != 0:
        raise ValueError(
            f"{num_query_heads} query heads are not a multiple of {num_kv_heads} KV heads"
        )
    group = num_query_heads // num_kv_heads
    out = torch.zeros((num_queries, num_query_heads, value_dim), dtype=out_dtype, device=q.device)
    if num_queries == 0 or num_keys == 0:
        return out
    # (Hkv, D, L) and (Hkv, L, Dv): one batched matmul per KV head, no copy per query head.
    keys_t = k.float().permute(1, 2, 0)
    values = v.float().permute(1, 0, 2)
    rows = _query_block_rows(num_query_heads, num_keys, budget)
    for start in range(0, num_queries, rows):
        stop = min(num_queries, start + rows)
        block = stop - start
        # Causal: rows start..stop-1 never see keys at or beyond `stop`.
        visible = min(num_keys, stop) if causal else num_keys
        # (n_b, Hkv, g, D) -> (Hkv, g·n_b, D); query head kv·g + j sits at [kv, j·n_b + row].
        q_block = (
            q[start:stop]
            .float()
            .view(block, num_kv_heads, group, head_dim)
            .permute(1, 2, 0, 3)
            .reshape(num_kv_heads, group * block, head_dim)
        )
        scores = torch.bmm(q_block, keys_t[:, :, :visible])
        scores.mul_(scale)
        if causal:
            positions = torch.arange(visible, device=q.device)
            query_pos = torch.arange(start, stop, device=q.device)
            masked = positions.view(1, visible) > query_pos.view(block, 1)
            scores.view(num_kv_heads, group, block, visible).masked_fill_(masked, -math.inf)
        probs = torch.softmax(scores, dim=-1)
        del scores
        o_block = torch.bmm(probs, values[:, :visible])  # (Hkv, g·n_b, Dv)
        del probs
        out[start:stop] = (
            o_block.view(num_kv_heads, group, block, value_dim)
            .permute(2, 0, 1, 3)
            .reshape(block, num_query_heads, value_dim)
            .to(out_dtype)
        )
    return out


def inverse_sqrt(dim: int) -> float:
    """The default attention scale 1/√dim (as a Python float)."""
    return 1.0 / math.sqrt(dim)


class Reference(nn.Module):
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
        block_size = k_cache.shape[1]
        scale = inverse_sqrt(q.shape[-1])
        out = torch.zeros(q.shape[:-1] + v_cache.shape[-1:], dtype=q.dtype, device=q.device)
        bounds = [int(b) for b in cu_seqlens_q.tolist()]
        used = [int(length) for length in seqused_k.tolist()]
        for s, kv_len in enumerate(used):
            q_lo, q_hi = bounds[s], bounds[s + 1]
            n_queries = q_hi - q_lo
            if n_queries <= 0:
                continue
            kv_len = max(kv_len, 0)
            num_blocks = -(-kv_len // block_size)
            blocks = block_table[s, :num_blocks].long()
            keys = _gather_blocks(k_cache, blocks, kv_len)
            values = _gather_blocks(v_cache, blocks, kv_len)
            out[q_lo:q_hi] = attend_fp32(
                q[q_lo:q_hi],
                keys,
                values,
                scale=scale,
                causal=n_queries == kv_len,
                out_dtype=q.dtype,
            )
        return out


@functools.cache
def _compiled_forward():
    return torch.compile(Reference.forward)


class Model(Reference):
    def forward(
        self,
        q: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        cu_seqlens_q: torch.Tensor,
        seqused_k: torch.Tensor,
        block_table: torch.Tensor,
    ) -> torch.Tensor:
        if q.is_cuda:
            return _compiled_forward()(
                self, q, k_cache, v_cache, cu_seqlens_q, seqused_k, block_table
            )
        return super().forward(q, k_cache, v_cache, cu_seqlens_q, seqused_k, block_table)
