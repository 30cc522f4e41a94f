"""``causal_conv1d`` (atrex_003): short causal depthwise conv over time with SiLU, bf16.

Channel-major layout: ``x`` is (C, T), time last. Per channel c the extended sequence is
``s_c = initial_state[0, c, :] ++ x[c, :]`` (length T + W − 1) and
``y[c, t] = bias[c] + Σ_j weight[c, j]·s_c[t + j]`` (cross-correlation: ``weight[c, W−1]``
multiplies the current token), accumulated in fp32 and rounded once to bf16; then
``out = rnd_bf16(silu(f32(y)))`` (no activation with ``activation=None``). No updated state
is returned.

Departures from upstream: none. Upstream convolves natively in bf16 (which PyTorch's GPU
kernel accumulates in fp32); this reference accumulates the taps in fp32 explicitly so that
CPU and CUDA compute the same thing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn
from torch.nn import functional

from evaluator.operators.base import BF16_POLICY, OperatorSpec, Work, randn_bf16

_SILU_NAMES = ("silu", "swish")


class Model(nn.Module):
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


def make_inputs(
    *, device: torch.device, generator: torch.Generator, token_count: int, dim: int, width: int = 4
) -> dict[str, torch.Tensor]:
    """x (C, T), weight (C, W), bias (C,), initial_state (1, C, W−1): all 0.02·N(0,1) bf16.

    Drawn in that order.
    """
    x = randn_bf16((dim, token_count), device=device, generator=generator, scale=0.02)
    weight = randn_bf16((dim, width), device=device, generator=generator, scale=0.02)
    bias = randn_bf16((dim,), device=device, generator=generator, scale=0.02)
    initial_state = randn_bf16((1, dim, width - 1), device=device, generator=generator, scale=0.02)
    return {"x": x, "weight": weight, "bias": bias, "initial_state": initial_state}


def work(init_kwargs: Mapping[str, Any], input_kwargs: Mapping[str, Any]) -> Work:
    """W = (2W + 4)·C·T (2 per tap, SiLU 4); Q_read = 2·C·(T + 2W); Q_write = 2·C·T.

    Without activation (``activation=None``, never published) the SiLU's 4 is dropped.
    """
    tokens, channels = int(input_kwargs["token_count"]), int(input_kwargs["dim"])
    width = int(input_kwargs.get("width", 4))
    activation_flops = 0 if init_kwargs.get("activation", "silu") is None else 4
    return Work(
        w_flops={"bf16": (2 * width + activation_flops) * channels * tokens},
        q_read=2 * channels * (tokens + 2 * width),
        q_write=2 * channels * tokens,
    )


SPEC = OperatorSpec(
    slug="causal_conv1d",
    atrex_id="atrex_003",
    model_class=Model,
    input_maker=make_inputs,
    work_model=work,
    policy=BF16_POLICY,
    dtype="bf16",
    phase="prefill",
)
