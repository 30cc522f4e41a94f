"""torch.compile baseline for ``causal_conv1d`` (the reference's arithmetic).

On CUDA the forward runs through ``torch.compile`` (inductor); on CPU it runs eagerly (see
the bundle's README). A baseline, not a submission: the harness counts inductor kernels and
PyTorch ops as fallback.
"""

from __future__ import annotations

import functools

import torch
from torch import nn
from torch.nn import functional

_SILU_NAMES = ("silu", "swish")


class Reference(nn.Module):
    """out = rnd_bf16(silu(f32(rnd_bf16(bias + Σ_j weight[:, j]·s[:, t + j])))), (C, T)."""

    def __init__(self, activation: str | None = "silu") -> None:
        super().__init__()
        if activation is not None and activation not in _SILU_NAMES:
            raise ValueError(f"activation must be 'silu', 'swish' or None, not {activation!r}")
        self.activation = activation

    def forward(
        self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, initial_state: torch.Tensor
    ) -> torch.Tensor:
        channels, tokens = x.shape
        width = weight.shape[1]
        extended = torch.cat([initial_state[0].float(), x.float()], dim=1)  # (C, T + W - 1)
        weight_f = weight.float()
        acc = bias.float().unsqueeze(1).expand(channels, tokens).clone()
        for tap in range(width):
            acc += weight_f[:, tap : tap + 1] * extended[:, tap : tap + tokens]
        y = acc.to(x.dtype)  # the convolution's own rounding to bf16
        if self.activation is None:
            return y
        return functional.silu(y.float()).to(x.dtype)


@functools.cache
def _compiled_forward():
    return torch.compile(Reference.forward)


class Model(Reference):
    def forward(
        self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, initial_state: torch.Tensor
    ) -> torch.Tensor:
        if x.is_cuda:
            return _compiled_forward()(self, x, weight, bias, initial_state)
        return super().forward(x, weight, bias, initial_state)
