"""Loops forever on the CPU in forward (the CPU time limit, or the wall-clock limit,
stops it)."""

from torch import nn


class Model(nn.Module):
    def __init__(self, **init_kwargs):
        super().__init__()

    def forward(self, *args, **kwargs):
        while True:
            pass
