"""``fused_rmsnorm_quant`` baseline: bf16 add, ``F.rms_norm``, then per-row fp8 quantisation.

Differs from the reference: the norm is the library's ``rms_norm`` on the bf16 sum (fp32
inside, one rounding: the single-rounding norm the reference writes out), and the row
maximum is taken on the bf16 norm, upcasting only the (T, 1) maxima. Still correct: the
maximum of bf16 values is exact in bf16; the scale and the codes follow the portal's fp8
conventions (docs/decisions.md 2, 3, 10): float8_e4m3fn, scale = amax / 448 as a true fp32
division (1 where the row is zero), codes clamped to +-448 before the cast.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional

from evaluator.operators._norms_quant import divide_by_fp8_max, saturating_fp8


class Model(nn.Module):
    """r = x + residual; n = rms_norm(r) * weight; (fp8(n / s), s (T, 1), r)."""

    def __init__(self, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps

    def forward(
        self, x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        summed = x + residual
        normed = functional.rms_norm(summed, (summed.shape[-1],), weight, self.eps)
        scale = divide_by_fp8_max(normed.abs().amax(dim=-1, keepdim=True).float())
        scale = scale.masked_fill(scale == 0, 1.0)
        return saturating_fp8(normed.float() / scale), scale, summed
