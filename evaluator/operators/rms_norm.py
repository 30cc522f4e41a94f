"""``rms_norm`` (atrex_027): RMSNorm over the last axis, bf16 in and out, fp32 inside.

out = rnd_bf16(f32(x) * rsqrt(mean_j f32(x_j)^2 + eps) * f32(weight)): products left to
right in fp32, one rounding.

Departures from upstream: none: computes what the release computes, with the same fp32
operations in the same order (the two agree bit for bit on CPU), the same eps default
(1e-6, which every shape passes) and the same inputs. Only the check differs: the portal's
bf16 rule (docs/decisions.md 5) instead of upstream's fixed allclose.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from evaluator.operators.base import BF16_POLICY, OperatorSpec, Work, randn_bf16


class Model(nn.Module):
    """out = rnd_bf16(f32(x) * rsqrt(mean(f32(x)^2) + eps) * f32(weight))."""

    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        inv_rms = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return (xf * inv_rms * weight.float()).to(x.dtype)


def make_inputs(
    *, device: torch.device, generator: torch.Generator, token_count: int, hidden_size: int
) -> dict[str, torch.Tensor]:
    """x: 0.02*N(0,1) in bf16 (T, H); weight: 0.02*N(0,1) + 1 in bf16 (H,). Order x, weight."""
    x = randn_bf16((token_count, hidden_size), device=device, generator=generator, scale=0.02)
    weight = randn_bf16((hidden_size,), device=device, generator=generator, scale=0.02) + 1.0
    return {"x": x, "weight": weight}


def work(init_kwargs: Mapping[str, Any], input_kwargs: Mapping[str, Any]) -> Work:
    """W = 3TH + T; Q_read = 2TH + 2H; Q_write = 2TH (bf16 = 2 bytes)."""
    tokens, hidden = int(input_kwargs["token_count"]), int(input_kwargs["hidden_size"])
    return Work(
        w_flops={"bf16": 3 * tokens * hidden + tokens},
        q_read=2 * tokens * hidden + 2 * hidden,
        q_write=2 * tokens * hidden,
    )


SPEC = OperatorSpec(
    slug="rms_norm",
    atrex_id="atrex_027",
    model_class=Model,
    input_maker=make_inputs,
    work_model=work,
    policy=BF16_POLICY,
    dtype="bf16",
    phase="prefill/decode",
)
