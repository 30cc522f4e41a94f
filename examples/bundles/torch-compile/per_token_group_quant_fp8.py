"""torch.compile baseline for ``per_token_group_quant_fp8`` (the reference's arithmetic).

On CUDA the forward runs through ``torch.compile`` (inductor); on CPU it runs eagerly (see
the bundle's README). A baseline, not a submission: the harness counts inductor kernels and
PyTorch ops as fallback.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import torch
from torch import nn

FP8_DTYPE = torch.float8_e4m3fn


FP8_MAX = 448.0


def divide_by_fp8_max(amax: torch.Tensor) -> torch.Tensor:
    """``amax / 448`` as a correctly rounded fp32 division, on every device.

    PyTorch's CUDA kernel turns division by a Python number into multiplication by its
    reciprocal (``1/448`` is inexact in fp32), while the CPU kernel divides; dividing by
    a tensor on the same device is a true IEEE division on both.
    """
    return amax / torch.full((), FP8_MAX, dtype=torch.float32, device=amax.device)


CHUNK_ELEMENTS = 1 << 28


def row_chunks(rows: int, row_length: int) -> Iterator[slice]:
    """Consecutive row slices covering ``rows`` rows, each about CHUNK_ELEMENTS elements."""
    step = max(1, CHUNK_ELEMENTS // max(1, row_length))
    for start in range(0, rows, step):
        yield slice(start, min(rows, start + step))


def saturating_fp8(values: torch.Tensor) -> torch.Tensor:
    """Clamp fp32 values to +-448, then cast (round to nearest even) to float8_e4m3fn."""
    return values.clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE)


class Reference(nn.Module):
    """s = max(max|x_group| / 448, 1e-10); quantized = fp8(clamp(x / s, +-448))."""

    def __init__(self, group_size: int) -> None:
        super().__init__()
        self.group_size = group_size

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        tokens, hidden = x.shape
        group = self.group_size
        if hidden % group:
            raise ValueError(
                f"per_token_group_quant_fp8: hidden size {hidden} is not a "
                f"multiple of group_size {group}"
            )
        groups = hidden // group
        quantized = torch.empty((tokens, hidden), dtype=FP8_DTYPE, device=x.device)
        scales = torch.empty((tokens, groups), dtype=torch.float32, device=x.device)
        for rows in row_chunks(tokens, hidden):
            xf = x[rows].float().reshape(-1, groups, group)
            group_max = xf.abs().amax(dim=-1)
            scale = divide_by_fp8_max(group_max).clamp_min(1e-10)
            quantized[rows] = saturating_fp8(xf / scale.unsqueeze(-1)).reshape(-1, hidden)
            scales[rows] = scale
        return {"quantized": quantized, "scales": scales}


@functools.cache
def _compiled_forward():
    return torch.compile(Reference.forward)


class Model(Reference):
    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        if x.is_cuda:
            return _compiled_forward()(self, x)
        return super().forward(x)
