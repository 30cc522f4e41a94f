"""``chunk_delta_rule_output`` baseline: all chunks at once: T padded to whole chunks and
viewed as (B, Hv, NC, cs, .), batched ``torch.matmul`` for the inter- and intra-chunk terms.

Differs from the reference: no loop over chunks (the reference walks them one by one, with
a causal mask and exponent matrix built per chunk); the zero padding to a multiple of cs is
upstream's own, and the padded rows are dropped at the end. Still correct: the padded keys
sit after every real query of their chunk, so the causal mask (l <= i) never lets them in;
the same fp32 products on upcast inputs, the "safe exp" (a positive exponent zeroes the
entry), A rounded to bf16 before A.V, the scale at the end and one rounding; only the fp32
summation order may differ.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional


class Model(nn.Module):
    """out = ((Q.H_c) exp(G) + bf16(A) V) * scale, every chunk in one batched call."""

    def __init__(self, chunk_size: int = 64, scale: float | None = None) -> None:
        super().__init__()
        self.chunk_size = int(chunk_size)
        self.scale = scale

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, h: torch.Tensor, g: torch.Tensor
    ) -> torch.Tensor:
        batch, tokens, qk_heads, key_dim = q.shape
        v_heads, value_dim = v.shape[2], v.shape[3]
        cs = self.chunk_size
        chunks = math.ceil(tokens / cs)
        pad = chunks * cs - tokens
        scale = key_dim**-0.5 if self.scale is None else float(self.scale)
        ratio = max(v_heads // qk_heads, 1)
        head_map = (torch.arange(v_heads, device=q.device) // ratio).clamp(max=qk_heads - 1)

        def chunked(x: torch.Tensor) -> torch.Tensor:  # (B, T, H, D) -> (B, H, NC, cs, D) fp32
            x = functional.pad(x.float(), (0, 0, 0, 0, 0, pad))
            return x.view(batch, chunks, cs, x.shape[2], x.shape[3]).permute(0, 3, 1, 2, 4)

        q_c = chunked(q.index_select(2, head_map))
        k_c = chunked(k.index_select(2, head_map))
        v_c = chunked(v)
        g_c = functional.pad(g.float(), (0, 0, 0, pad)).view(batch, chunks, cs, v_heads)
        g_c = g_c.permute(0, 3, 1, 2)  # (B, Hv, NC, cs)
        inter = torch.matmul(q_c, h.float().transpose(1, 2)) * g_c.exp().unsqueeze(-1)
        exponent = g_c.unsqueeze(-1) - g_c.unsqueeze(-2)  # G[i] - G[l]
        causal = torch.ones(cs, cs, dtype=torch.bool, device=q.device).tril()
        keep = causal & (exponent <= 0)
        scores = torch.matmul(q_c, k_c.transpose(-1, -2)) * exponent.exp()
        attn = scores.masked_fill(~keep, 0.0).to(torch.bfloat16).float()
        out = (inter + torch.matmul(attn, v_c)) * scale  # (B, Hv, NC, cs, V)
        out = out.permute(0, 2, 3, 1, 4).reshape(batch, chunks * cs, v_heads, value_dim)
        return out[:, :tokens].to(v.dtype)
