"""Honest Triton RMSNorm launched on a side stream that the caller's stream never waits for.

The evaluator synchronises the whole device, so the result is complete when it is read,
and the profiler pass must still see the kernel.
"""

import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def _side_stream_rms_kernel(
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
        self.side = None

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        hidden = x.shape[-1]
        rows = x.reshape(-1, hidden)
        out = torch.empty_like(rows)
        if self.side is None:
            self.side = torch.cuda.Stream(device=x.device)
        self.side.wait_stream(torch.cuda.current_stream(x.device))  # inputs are ready
        block = triton.next_power_of_2(hidden)
        with torch.cuda.stream(self.side):
            _side_stream_rms_kernel[(rows.shape[0],)](
                rows, weight, out, rows.stride(0), out.stride(0), hidden, self.eps, BLOCK=block
            )
        return out.view(x.shape)
