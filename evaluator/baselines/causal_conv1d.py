"""``causal_conv1d`` baseline: one depthwise ``F.conv1d`` over the state-prefixed sequence,
then ``F.silu``, in bf16.

Differs from the reference: PyTorch's grouped convolution (groups = C) on the bf16 tensors
instead of a loop over the W taps in fp32 with explicit copies. Still correct: the
convolution accumulates the taps and the bias in fp32 and rounds once to bf16 (the
reference's first rounding; only the fp32 summation order may differ), and the bf16 SiLU
computes in fp32 and rounds once (its second). The weight is applied as a
cross-correlation, weight[c, W-1] on the current token, as ``conv1d`` does.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional


class Model(nn.Module):
    """out = silu(conv1d(cat(state, x), weight[:, None, :], bias, groups=C))."""

    def __init__(self, activation: str | None = "silu") -> None:
        super().__init__()
        if activation is not None and activation not in ("silu", "swish"):
            raise ValueError(f"activation must be 'silu', 'swish' or None, not {activation!r}")
        self.activation = activation

    def forward(
        self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, initial_state: torch.Tensor
    ) -> torch.Tensor:
        channels = x.shape[0]
        extended = torch.cat((initial_state[0], x), dim=1).unsqueeze(0)  # (1, C, T + W - 1)
        y = functional.conv1d(extended, weight.unsqueeze(1), bias, groups=channels)[0]
        return y if self.activation is None else functional.silu(y)
