"""torch.compile baseline for ``chunk_gated_delta_rule_state`` (the reference's arithmetic).

On CUDA the forward runs through ``torch.compile`` (inductor); on CPU it runs eagerly (see
the bundle's README). A baseline, not a submission: the harness counts inductor kernels and
PyTorch ops as fallback.
"""

from __future__ import annotations

import functools
import math

import torch
from torch import nn


def heads_major_fp32(x: torch.Tensor, head_map: torch.Tensor | None = None) -> torch.Tensor:
    """(B, T, H, D) -> fp32 (B, Hv, T, D), optionally gathering heads through ``head_map``."""
    xf = x.float()
    if head_map is not None:
        xf = xf.index_select(2, head_map)
    return xf.permute(0, 2, 1, 3).contiguous()


def safe_exp(exponent: torch.Tensor) -> torch.Tensor:
    """exp(d) where d <= 0, else exactly 0 (a positive exponent zeroes the entry)."""
    return torch.where(exponent <= 0, torch.exp(exponent), torch.zeros_like(exponent))


def value_head_map(num_v_heads: int, num_qk_heads: int, *, device: torch.device) -> torch.Tensor:
    """Index of the query/key head read by each value head: min(⌊j/r⌋, Hqk−1), r=max(⌊Hv/Hqk⌋,1)."""
    ratio = max(num_v_heads // num_qk_heads, 1)
    heads = torch.arange(num_v_heads, device=device, dtype=torch.long) // ratio
    return heads.clamp(max=num_qk_heads - 1)


def write_back_pool(
    pool: torch.Tensor, indices: torch.Tensor, states: torch.Tensor
) -> torch.Tensor:
    """A copy of ``pool`` with slot ``indices[b]`` replaced by ``states[b]`` for every b.

    Written in batch order, so if two batch entries named the same slot the later one would
    win (the published inputs use distinct slots, b mod S).
    """
    result = pool.clone()
    for batch_index, slot in enumerate(indices.tolist()):
        result[int(slot)] = states[batch_index].to(result.dtype)
    return result


class Reference(nn.Module):
    """Walks the chunks: start states ``h``, corrected values ``v_new``, final pool."""

    def __init__(self, chunk_size: int = 64) -> None:
        super().__init__()
        self.chunk_size = int(chunk_size)

    def forward(
        self,
        k: torch.Tensor,
        w: torch.Tensor,
        u: torch.Tensor,
        g: torch.Tensor,
        initial_state: torch.Tensor,
        initial_state_indices: torch.Tensor,
    ) -> dict[str, torch.Tensor]:
        batch, tokens, num_k_heads, key_dim = k.shape
        num_v_heads, value_dim = u.shape[2], u.shape[3]
        chunk = self.chunk_size
        num_chunks = math.ceil(tokens / chunk)
        head_map = value_head_map(num_v_heads, num_k_heads, device=k.device)
        k_all = heads_major_fp32(k, head_map)  # (B, Hv, T, K)
        w_all = heads_major_fp32(w)  # (B, Hv, T, K)
        u_all = heads_major_fp32(u)  # (B, Hv, T, V)
        g_all = g.float().permute(0, 2, 1)  # (B, Hv, T)
        slots = initial_state_indices.long()
        state = initial_state.index_select(0, slots).float()  # (B, Hv, K, V), a copy
        h = torch.empty(
            (batch, num_chunks, num_v_heads, key_dim, value_dim),
            dtype=torch.bfloat16,
            device=k.device,
        )
        v_new = torch.empty_like(u)
        for index in range(num_chunks):
            start, stop = index * chunk, min(tokens, (index + 1) * chunk)
            state_bf16 = state.to(torch.bfloat16)
            h[:, index] = state_bf16
            corrected = u_all[:, :, start:stop] - torch.matmul(
                w_all[:, :, start:stop], state_bf16.float()
            )
            v_new[:, start:stop] = corrected.permute(0, 2, 1, 3).to(v_new.dtype)
            g_c = g_all[:, :, start:stop]
            gamma = g_c[:, :, -1]  # (B, Hv)
            factor = safe_exp(gamma.unsqueeze(-1) - g_c)  # (B, Hv, n)
            gated = (corrected * factor.unsqueeze(-1)).to(torch.bfloat16).float()
            update = torch.matmul(k_all[:, :, start:stop].transpose(-1, -2), gated)
            state = state * torch.exp(gamma)[..., None, None] + update
        final_state = write_back_pool(initial_state, slots, state)
        return {"h": h, "v_new": v_new, "final_state": final_state}


@functools.cache
def _compiled_forward():
    return torch.compile(Reference.forward)


class Model(Reference):
    def forward(
        self,
        k: torch.Tensor,
        w: torch.Tensor,
        u: torch.Tensor,
        g: torch.Tensor,
        initial_state: torch.Tensor,
        initial_state_indices: torch.Tensor,
    ) -> dict[str, torch.Tensor]:
        if k.is_cuda:
            return _compiled_forward()(self, k, w, u, g, initial_state, initial_state_indices)
        return super().forward(k, w, u, g, initial_state, initial_state_indices)
