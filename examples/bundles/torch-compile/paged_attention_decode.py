"""torch.compile baseline for ``paged_attention_decode`` (the reference's arithmetic).

On CUDA the forward runs through ``torch.compile`` (inductor); on CPU it runs eagerly (see
the bundle's README). A baseline, not a submission: the harness counts inductor kernels and
PyTorch ops as fallback.
"""

from __future__ import annotations

import functools

import torch
from _attention import attend_fp32, inverse_sqrt
from torch import nn


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


class Reference(nn.Module):
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


@functools.cache
def _compiled_forward():
    return torch.compile(Reference.forward)


class Model(Reference):
    def forward(
        self,
        query: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        block_tables: torch.Tensor,
        seq_lens: torch.Tensor,
    ) -> torch.Tensor:
        if query.is_cuda:
            return _compiled_forward()(self, query, k_cache, v_cache, block_tables, seq_lens)
        return super().forward(query, k_cache, v_cache, block_tables, seq_lens)
