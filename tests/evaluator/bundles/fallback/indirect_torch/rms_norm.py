"""PyTorch reached indirectly: importlib, a computed getattr, and torch.ops.aten."""

import importlib

import torch
from torch import nn

_torch = importlib.import_module("to" + "rch")
_rsqrt = getattr(torch, "rs" + "qrt")
_mean = torch.ops.aten.mean.dim


class Model(nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        mean_square = _mean(_torch.mul(xf, xf), [-1], True)
        return (xf * _rsqrt(mean_square + self.eps) * weight.float()).to(x.dtype)
