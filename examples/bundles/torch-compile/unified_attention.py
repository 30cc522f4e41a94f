"""torch.compile baseline for ``unified_attention`` (the reference's arithmetic).

On CUDA the forward runs through ``torch.compile`` (inductor); on CPU it runs eagerly (see
the bundle's README). A baseline, not a submission: the harness counts inductor kernels and
PyTorch ops as fallback.
"""

from __future__ import annotations

import functools

import torch
from _attention import attend_fp32, inverse_sqrt
from torch import nn


def _gather_blocks(cache: torch.Tensor, blocks: torch.Tensor, length: int) -> torch.Tensor:
    """Rows p < length of one sequence from a (NB, bs, H, D) cache: (length, H, D)."""
    gathered = cache.index_select(0, blocks)  # (nblk, bs, H, D)
    return gathered.reshape(-1, *cache.shape[2:])[:length]


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
