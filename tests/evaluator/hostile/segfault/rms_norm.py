"""Writes to a kernel-space address through ctypes in forward: the child dies of SIGSEGV."""

import ctypes

from torch import nn


class Model(nn.Module):
    def __init__(self, **init_kwargs):
        super().__init__()

    def forward(self, *args, **kwargs):
        ctypes.memset(0xFFFF_FFFF_FFFF_0000, 0, 8)
        raise AssertionError("unreachable")
