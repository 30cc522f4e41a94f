"""A Triton kernel that stores far outside its output buffer: an illegal memory access,
which leaves the child's CUDA context unusable (GPU only)."""

import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def _wild_store(out_ptr, far, BLOCK: tl.constexpr):
    # ``far`` arrives as a runtime int64 (a literal 1 << 40 would not fit Triton's int32
    # constants and fail to compile): elements 4 TiB past the output, never mapped.
    offsets = tl.arange(0, BLOCK) + far
    tl.store(out_ptr + offsets, tl.zeros([BLOCK], dtype=tl.float32))


class Model(nn.Module):
    def __init__(self, **init_kwargs):
        super().__init__()

    def forward(self, x, weight, eps=1e-6):
        out = torch.empty_like(x, dtype=torch.float32)
        _wild_store[(1,)](out, 1 << 40, BLOCK=128)
        torch.cuda.synchronize()
        return out.to(x.dtype)
