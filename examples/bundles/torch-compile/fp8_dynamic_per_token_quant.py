"""torch.compile baseline for ``fp8_dynamic_per_token_quant`` (the reference's arithmetic).

On CUDA the forward runs through ``torch.compile`` (inductor); on CPU it runs eagerly (see
the bundle's README). A baseline, not a submission: the harness counts inductor kernels and
PyTorch ops as fallback.
"""

from __future__ import annotations

import functools

import torch
from torch import nn

FP8_MAX = 448.0


def divide_by_fp8_max(amax: torch.Tensor) -> torch.Tensor:
    """``amax / 448`` as a correctly rounded fp32 division, on every device.

    PyTorch's CUDA kernel turns division by a Python number into multiplication by its
    reciprocal (``1/448`` is inexact in fp32), while the CPU kernel divides; dividing by
    a tensor on the same device is a true IEEE division on both.
    """
    return amax / torch.full((), FP8_MAX, dtype=torch.float32, device=amax.device)


FP8_DTYPE = torch.float8_e4m3fn


def saturating_fp8(values: torch.Tensor) -> torch.Tensor:
    """Clamp fp32 values to +-448, then cast (round to nearest even) to float8_e4m3fn."""
    return values.clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE)


class Reference(nn.Module):
    """q = fp8(clamp(x * (1 / (max(max|x|, 1e-12) / 448)), +-448)); returns (q, scale (T,))."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        xf = x.float()
        row_max = xf.abs().amax(dim=-1).clamp_min(1e-12)
        scale = divide_by_fp8_max(row_max)
        inverse = torch.reciprocal(scale)
        q = saturating_fp8(xf * inverse.unsqueeze(-1))
        return q, scale


@functools.cache
def _compiled_forward():
    return torch.compile(Reference.forward)


class Model(Reference):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if x.is_cuda:
            return _compiled_forward()(self, x)
        return super().forward(x)
