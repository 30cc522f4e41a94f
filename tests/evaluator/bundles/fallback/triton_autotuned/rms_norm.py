"""Honest Triton RMSNorm behind an autotuner: its first call benchmarks three configs."""

import torch
import triton
import triton.language as tl
from torch import nn


@triton.autotune(
    configs=[triton.Config({}, num_warps=warps) for warps in (2, 4, 8)], key=["hidden"]
)
@triton.jit
def _autotuned_rms_kernel(
    x_ptr, weight_ptr, out_ptr, x_row_stride, out_row_stride, hidden, eps, BLOCK: tl.constexpr
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < hidden
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    inv_rms = tl.rsqrt(tl.sum(x * x, axis=0) / hidden + eps)
    weight = tl.load(weight_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    out = x * inv_rms * weight
    tl.store(out_ptr + row * out_row_stride + cols, out.to(out_ptr.dtype.element_ty), mask=mask)


class Model(nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        hidden = x.shape[-1]
        rows = x.reshape(-1, hidden)
        out = torch.empty_like(rows)
        _autotuned_rms_kernel[(rows.shape[0],)](
            rows,
            weight,
            out,
            rows.stride(0),
            out.stride(0),
            hidden,
            self.eps,
            BLOCK=triton.next_power_of_2(hidden),
        )
        return out.view(x.shape)
