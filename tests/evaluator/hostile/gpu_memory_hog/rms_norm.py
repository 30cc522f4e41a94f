"""Allocates GPU memory in forward until none is left and keeps it (GPU only)."""

import torch
from torch import nn

_hoard = []


class Model(nn.Module):
    def __init__(self, **init_kwargs):
        super().__init__()

    def forward(self, x, weight, eps=1e-6):
        while True:
            _hoard.append(torch.empty(1 << 30, dtype=torch.uint8, device=x.device))
