"""``fused_qkv_rope`` baseline: the q and k heads rotated together in one NeoX rotate-half.

Differs from the reference: the q and k heads are rotated as one (T, H + Hkv, D) view of
the packed row (one set of elementwise kernels instead of one per tensor), with the cos/sin
table of the positions computed as serving engines' torch-native rotary does
(``1 / base**(arange(0, d, 2) / d)`` times the positions, in fp32). Still correct: the same
fp32 angles (the same fp32 power and division), the rotation in fp32 on the upcast heads
with one rounding to the dtype, dims beyond the rotary width and v copied unchanged.
"""

from __future__ import annotations

import torch
from torch import nn


class Model(nn.Module):
    """(q, k, v) from packed qkv (+bias); NeoX rotary of width rope_dim on q and k."""

    def __init__(
        self,
        num_heads: int,
        num_kv_heads: int,
        head_dim: int,
        rope_dim: int,
        rope_base: float = 10000.0,
    ) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = head_dim
        self.rope_dim = rope_dim
        self.rope_base = rope_base

    def forward(
        self, qkv: torch.Tensor, positions: torch.Tensor, qkv_bias: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if qkv_bias is not None:
            qkv = qkv + qkv_bias
        tokens, dim, rope, half = qkv.shape[0], self.head_dim, self.rope_dim, self.rope_dim // 2
        heads, kv_heads = self.num_heads, self.num_kv_heads
        qk = qkv[:, : (heads + kv_heads) * dim].view(tokens, heads + kv_heads, dim)
        exponents = torch.arange(0, rope, 2, dtype=torch.float32, device=qkv.device) / rope
        inv_freq = 1.0 / (self.rope_base**exponents)
        angles = (positions.float().unsqueeze(-1) * inv_freq).unsqueeze(1)  # (T, 1, d/2)
        cos, sin = angles.cos(), angles.sin()
        x1, x2 = qk[..., :half].float(), qk[..., half:rope].float()
        rotated = torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).to(qkv.dtype)
        qk = torch.cat((rotated, qk[..., rope:]), dim=-1)
        v = qkv[:, (heads + kv_heads) * dim : (heads + 2 * kv_heads) * dim]
        return qk[:, :heads], qk[:, heads:], v.reshape(tokens, kv_heads, dim).clone()
