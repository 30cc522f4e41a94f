"""A fallback in disguise: a real Triton launch that touches 16 elements, and the RMSNorm
itself computed by torch.matmul and PyTorch elementwise kernels."""

import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def _touch_kernel(out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(out_ptr + offsets, mask=mask), mask=mask)


class Model(nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        ones = torch.ones(x.shape[-1], 1, device=x.device, dtype=torch.float32)
        mean_square = torch.matmul(xf * xf, ones) / x.shape[-1]  # cuBLAS does the reduction
        out = (xf * torch.rsqrt(mean_square + self.eps) * weight.float()).to(x.dtype)
        _touch_kernel[(1,)](out, 16, BLOCK=16)
        return out
