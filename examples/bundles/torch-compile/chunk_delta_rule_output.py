"""torch.compile baseline for ``chunk_delta_rule_output`` (the reference's arithmetic).

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


class Reference(nn.Module):
    """Inter-chunk term from each chunk's start state plus a gated causal intra-chunk term."""

    def __init__(self, chunk_size: int = 64, scale: float | None = None) -> None:
        super().__init__()
        self.chunk_size = int(chunk_size)
        self.scale = scale

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, h: torch.Tensor, g: torch.Tensor
    ) -> torch.Tensor:
        batch, tokens, num_qk_heads, key_dim = q.shape
        num_v_heads = v.shape[2]
        chunk = self.chunk_size
        num_chunks = math.ceil(tokens / chunk)
        if h.shape[1] != num_chunks:
            raise ValueError(
                f"h has {h.shape[1]} chunk states; T={tokens} with chunk_size "
                f"{chunk} needs {num_chunks}"
            )
        scale = key_dim**-0.5 if self.scale is None else float(self.scale)
        head_map = value_head_map(num_v_heads, num_qk_heads, device=q.device)
        q_all = heads_major_fp32(q, head_map)  # (B, Hv, T, K)
        k_all = heads_major_fp32(k, head_map)  # (B, Hv, T, K)
        v_all = heads_major_fp32(v)  # (B, Hv, T, V)
        g_all = g.float().permute(0, 2, 1)  # (B, Hv, T)
        out = torch.empty_like(v)
        for index in range(num_chunks):
            start, stop = index * chunk, min(tokens, (index + 1) * chunk)
            q_c, k_c = q_all[:, :, start:stop], k_all[:, :, start:stop]
            v_c, g_c = v_all[:, :, start:stop], g_all[:, :, start:stop]
            h_c = h[:, index].float()  # (B, Hv, K, V)
            inter = torch.matmul(q_c, h_c) * torch.exp(g_c).unsqueeze(-1)
            exponent = g_c.unsqueeze(-1) - g_c.unsqueeze(-2)  # G[i] - G[l]
            length = stop - start
            causal = torch.ones(length, length, dtype=torch.bool, device=q.device).tril()
            keep = causal & (exponent <= 0)
            scores = torch.matmul(q_c, k_c.transpose(-1, -2)) * safe_exp(exponent)
            attn = torch.where(keep, scores, torch.zeros_like(scores))
            attn = attn.to(torch.bfloat16).float()
            o = (inter + torch.matmul(attn, v_c)) * scale
            out[:, start:stop] = o.permute(0, 2, 1, 3).to(out.dtype)
        return out


@functools.cache
def _compiled_forward():
    return torch.compile(Reference.forward)


class Model(Reference):
    def forward(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, h: torch.Tensor, g: torch.Tensor
    ) -> torch.Tensor:
        if q.is_cuda:
            return _compiled_forward()(self, q, k, v, h, g)
        return super().forward(q, k, v, h, g)
