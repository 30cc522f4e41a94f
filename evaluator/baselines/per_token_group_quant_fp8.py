"""``per_token_group_quant_fp8`` baseline: the whole (T, H/g, g) view at once.

Differs from the reference: no row chunking (the reference bounds its fp32 temporaries for
a 12.6 GB input; a practitioner quantises the tensor in one go) and the group maxima are
taken on the bf16 input, not on an fp32 copy (exact: the maximum of bf16 values is one of
them). Still correct: s = max(max|x_group| / 448, 1e-10) with a true fp32 division, codes
fp8(clamp(x / s, +-448)) by true division, float8_e4m3fn (docs/decisions.md 2, 3, 10).
"""

from __future__ import annotations

import torch
from torch import nn

from evaluator.operators._norms_quant import divide_by_fp8_max, saturating_fp8


class Model(nn.Module):
    """scales = max(amax(x_group) / 448, 1e-10); quantized = fp8(clamp(x / s, +-448))."""

    def __init__(self, group_size: int) -> None:
        super().__init__()
        self.group_size = group_size

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        tokens, hidden = x.shape
        if hidden % self.group_size:
            raise ValueError(
                f"per_token_group_quant_fp8: hidden size {hidden} is not a multiple of "
                f"group_size {self.group_size}"
            )
        grouped = x.view(tokens, hidden // self.group_size, self.group_size)
        scales = divide_by_fp8_max(grouped.abs().amax(dim=-1).float()).clamp_min(1e-10)
        quantized = saturating_fp8(grouped.float() / scales.unsqueeze(-1))
        return {"quantized": quantized.view(tokens, hidden), "scales": scales}
