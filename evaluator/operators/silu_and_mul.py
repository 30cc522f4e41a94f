"""``silu_and_mul`` (atrex_028): SwiGLU of a fused gate/up projection, bf16.

d = last dim // 2; gate, up = the first and the next d values of the last axis;
out = rnd_bf16(f32(rnd_bf16(silu(f32(gate)))) * f32(up)): the SiLU is rounded to bf16
before the product, as upstream. A last dimension below 2 gives rnd_bf16(silu(x)).

Departures from upstream: none: computes what the release computes. Upstream multiplies the
two bf16 tensors (fp32 inside, one rounding); here both are upcast and the product rounded
once, which is the same value, since the product of two bf16 numbers is exact in fp32 (the
two agree bit for bit on CPU). Only the check differs: the portal's bf16 rule
(docs/decisions.md 5) instead of upstream's fixed allclose.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn
from torch.nn import functional

from evaluator.operators.base import BF16_POLICY, OperatorSpec, Work, randn_bf16


class Model(nn.Module):
    """out = rnd_bf16(f32(rnd_bf16(silu(f32(gate)))) * f32(up)); gate, up = halves of x."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        if half == 0:
            return functional.silu(x.float()).to(x.dtype)
        gate, up = x[..., :half], x[..., half : 2 * half]
        silu_rounded = functional.silu(gate.float()).to(x.dtype)
        return (silu_rounded.float() * up.float()).to(x.dtype)


def make_inputs(
    *, device: torch.device, generator: torch.Generator, shape: list[int]
) -> dict[str, torch.Tensor]:
    """x: N(0,1) in bf16 of the given shape (an empty shape means (1,))."""
    dims = tuple(int(d) for d in shape) or (1,)
    return {"x": randn_bf16(dims, device=device, generator=generator)}


def work(init_kwargs: Mapping[str, Any], input_kwargs: Mapping[str, Any]) -> Work:
    """With R rows and d = last/2: W = 5Rd; Q_read = 4Rd; Q_write = 2Rd."""
    dims = [int(d) for d in input_kwargs["shape"]] or [1]
    rows, half = math.prod(dims[:-1]), dims[-1] // 2
    return Work(w_flops={"bf16": 5 * rows * half}, q_read=4 * rows * half, q_write=2 * rows * half)


SPEC = OperatorSpec(
    slug="silu_and_mul",
    atrex_id="atrex_028",
    model_class=Model,
    input_maker=make_inputs,
    work_model=work,
    policy=BF16_POLICY,
    dtype="bf16",
    phase="prefill/decode",
)
