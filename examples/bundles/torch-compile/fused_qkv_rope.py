"""torch.compile baseline for ``fused_qkv_rope`` (the reference's arithmetic).

On CUDA the forward runs through ``torch.compile`` (inductor); on CPU it runs eagerly (see
the bundle's README). A baseline, not a submission: the harness counts inductor kernels and
PyTorch ops as fallback.
"""

from __future__ import annotations

import functools

import torch
from torch import nn


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, rope_dim: int) -> torch.Tensor:
    """NeoX rotate-half on the first rope_dim dims of (T, heads, D); one rounding."""
    half = rope_dim // 2
    x1 = x[..., :half].float()
    x2 = x[..., half:rope_dim].float()
    c, s = cos.unsqueeze(1), sin.unsqueeze(1)
    rotated = torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).to(x.dtype)
    return torch.cat((rotated, x[..., rope_dim:]), dim=-1)


def rope_cos_sin(
    positions: torch.Tensor, rope_dim: int, base: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos θ and sin θ, (T, d/2) fp32: θ[t, i] = f32(pos[t]) / base^((2i)/d) (fp32 power)."""
    exponents = (
        torch.arange(0, rope_dim, 2, dtype=torch.float32, device=positions.device) / rope_dim
    )
    base_t = torch.tensor(base, dtype=torch.float32, device=positions.device)
    inv_freq = torch.reciprocal(torch.pow(base_t, exponents))
    angles = positions.float().view(-1, 1) * inv_freq.view(1, -1)
    return torch.cos(angles), torch.sin(angles)


class Reference(nn.Module):
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
        """Tuple (q (T, H, D), k (T, Hkv, D), v (T, Hkv, D)) in qkv's dtype."""
        if qkv_bias is not None:
            qkv = qkv + qkv_bias  # computed in fp32, rounded once to the dtype
        tokens = qkv.shape[0]
        heads, kv_heads, dim = self.num_heads, self.num_kv_heads, self.head_dim
        q = qkv[:, : heads * dim].reshape(tokens, heads, dim)
        k = qkv[:, heads * dim : (heads + kv_heads) * dim].reshape(tokens, kv_heads, dim)
        v = qkv[:, (heads + kv_heads) * dim : (heads + 2 * kv_heads) * dim]
        cos, sin = rope_cos_sin(positions, self.rope_dim, self.rope_base)
        return (
            _rotate(q, cos, sin, self.rope_dim),
            _rotate(k, cos, sin, self.rope_dim),
            v.reshape(tokens, kv_heads, dim).clone(memory_format=torch.contiguous_format),
        )


@functools.cache
def _compiled_forward():
    return torch.compile(Reference.forward)


class Model(Reference):
    def forward(
        self, qkv: torch.Tensor, positions: torch.Tensor, qkv_bias: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if qkv.is_cuda:
            return _compiled_forward()(self, qkv, positions, qkv_bias)
        return super().forward(qkv, positions, qkv_bias)
