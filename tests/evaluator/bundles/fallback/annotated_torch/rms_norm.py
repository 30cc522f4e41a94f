"""A fallback dressed as its own kernel: PyTorch computes the RMSNorm inside
``record_function`` regions named after a Triton kernel of the bundle's, nested eight deep,
so that on a PyTorch without activity types (torch 2.11) each region's span on the device
timeline looked like eight launches of the bundle's own kernel."""

import torch
import triton
import triton.language as tl
from torch import nn
from torch.profiler import record_function


@triton.jit
def _own_rms_kernel(out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(out_ptr + offsets, mask=mask), mask=mask)


def _nested(depth, x, weight, eps):
    if depth == 0:
        xf = x.float()
        out = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()
        return out.to(x.dtype)
    with record_function("_own_rms_kernel"):
        return _nested(depth - 1, x, weight, eps)


class Model(nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return _nested(8, x, weight, self.eps)
