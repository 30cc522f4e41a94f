"""SiLU-and-mul in plain PyTorch (a fallback)."""

import torch
from torch import nn
from torch.nn import functional


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        return functional.silu(x[..., :half]) * x[..., half:]
