"""RMSNorm through torch.compile: inductor writes Triton kernels, but not the submission."""

import torch
from torch import nn


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


_compiled_rms_norm = torch.compile(_rms_norm, dynamic=False)


class Model(nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return _compiled_rms_norm(x, weight, self.eps)
