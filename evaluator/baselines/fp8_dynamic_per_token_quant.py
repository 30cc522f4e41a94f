"""``fp8_dynamic_per_token_quant`` baseline: row maxima on the bf16 input, one fp32 product.

Differs from the reference: the row maximum is taken on the bf16 tensor (exact: a maximum
of bf16 values is one of them) instead of on a full fp32 copy, and the scaled values are
computed in one upcast-multiply. Still correct: scale = max(m, 1e-12) / 448 as a true fp32
division, the codes are fp8(clamp(x * (1 / scale), +-448)) as the contract asks
(multiplying by the reciprocal), float8_e4m3fn (docs/decisions.md 2, 3, 10).
"""

from __future__ import annotations

import torch
from torch import nn

from evaluator.operators._norms_quant import divide_by_fp8_max, saturating_fp8


class Model(nn.Module):
    """q = fp8(clamp(x * (1 / s), +-448)), s = max(max|x|, 1e-12) / 448; returns (q, s (T,))."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        scale = divide_by_fp8_max(x.abs().amax(dim=-1).float().clamp_min(1e-12))
        return saturating_fp8(x.float() * scale.reciprocal().unsqueeze(-1)), scale
