"""``fused_add_rms_norm`` (atrex_008): residual add then RMSNorm; returns out and residual.

r = rnd_bf16(x + residual), returned as ``residual``; the statistics use the rounded r:
out = rnd_bf16(f32(r) * rsqrt(mean f32(r)^2 + eps) * f32(weight)). Returns a dict with
``out`` and ``residual``, as upstream.

Departures from upstream: none: computes what the release computes, with the same rounding
points and the same fp32 operations in the same order (both outputs agree bit for bit on
CPU), the same eps default (1e-6, which every shape passes) and the same inputs (the
residual unscaled N(0,1)). Only the check differs: the portal's bf16 rule on each output
(docs/decisions.md 5) instead of upstream's fixed allclose.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from evaluator.operators.base import BF16_POLICY, OperatorSpec, Work, randn_bf16


class Model(nn.Module):
    """r = rnd_bf16(x + residual); out = rnd_bf16(f32(r) * rsqrt(mean(f32(r)^2) + eps) * w)."""

    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(
        self, x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        summed = x + residual  # bf16 add: computed in fp32, rounded once
        sf = summed.float()  # the statistics use the rounded bf16 sum
        inv_rms = torch.rsqrt(sf.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        out = (sf * inv_rms * weight.float()).to(x.dtype)
        return {"out": out, "residual": summed}


def make_inputs(
    *, device: torch.device, generator: torch.Generator, token_count: int, hidden_size: int
) -> dict[str, torch.Tensor]:
    """x: 0.02*N(0,1); residual: N(0,1); weight: 0.02*N(0,1) + 1; all bf16, in that order."""
    shape = (token_count, hidden_size)
    x = randn_bf16(shape, device=device, generator=generator, scale=0.02)
    residual = randn_bf16(shape, device=device, generator=generator)
    weight = randn_bf16((hidden_size,), device=device, generator=generator, scale=0.02) + 1.0
    return {"x": x, "residual": residual, "weight": weight}


def work(init_kwargs: Mapping[str, Any], input_kwargs: Mapping[str, Any]) -> Work:
    """W = 4TH + T; Q_read = 4TH + 2H; Q_write = 4TH."""
    tokens, hidden = int(input_kwargs["token_count"]), int(input_kwargs["hidden_size"])
    return Work(
        w_flops={"bf16": 4 * tokens * hidden + tokens},
        q_read=4 * tokens * hidden + 2 * hidden,
        q_write=4 * tokens * hidden,
    )


SPEC = OperatorSpec(
    slug="fused_add_rms_norm",
    atrex_id="atrex_008",
    model_class=Model,
    input_maker=make_inputs,
    work_model=work,
    policy=BF16_POLICY,
    dtype="bf16",
    phase="prefill/decode",
    output_names=("out", "residual"),
)
