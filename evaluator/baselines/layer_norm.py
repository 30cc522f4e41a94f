"""``layer_norm`` baseline: ``F.layer_norm`` on the bf16 tensors.

Differs from the reference: one fused library call instead of an upcast copy and the
two-pass mean/variance formula. Still correct: PyTorch's ``layer_norm`` computes the
biased variance and the affine transform in fp32 for bf16 inputs (eps 1e-5, the last axis)
and rounds once; only the fp32 rounding inside differs (the release's own reference is this
call).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional

EPS = 1e-5


class Model(nn.Module):
    """out = F.layer_norm(x, (Hd,), weight, bias, 1e-5)."""

    def forward(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        if x.dim() == 0:
            return x.clone()
        return functional.layer_norm(x, (x.shape[-1],), weight, bias, EPS)
