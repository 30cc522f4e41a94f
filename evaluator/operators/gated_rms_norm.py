"""``gated_rms_norm`` (atrex_014): RMSNorm with a SiLU (or sigmoid) gate, FLA ``RMSNormGated``.

Everything is computed in fp32 on the upcast inputs and rounded to bf16 once. The norm is
over the whole row (no groups). With ``norm_before_gate`` (every published shape) the gate
multiplies the normalised value; otherwise the gated value is normalised.

Departures from upstream: none: computes what the release computes, with the products in
the release's order (x * rstd * weight, then the gate; the two agree bit for bit on CPU),
the same defaults (eps 1e-6, norm_before_gate, SiLU) and the same inputs. An unknown
activation is refused when the module is built (upstream: at its first call). Only the
check differs: the portal's bf16 rule (docs/decisions.md 5) instead of upstream's fixed
allclose.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn
from torch.nn import functional

from evaluator.operators.base import BF16_POLICY, OperatorSpec, Work, randn_bf16

_ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "silu": functional.silu,
    "swish": functional.silu,
    "sigmoid": torch.sigmoid,
}


class Model(nn.Module):
    """norm_before_gate: out = rnd_bf16(x * rsqrt(mean x^2 + eps) * weight * act(z));
    otherwise x' = x * act(z), out = rnd_bf16(x' * rsqrt(mean x'^2 + eps) * weight)."""

    def __init__(
        self, eps: float = 1e-6, norm_before_gate: bool = True, activation: str = "silu"
    ) -> None:
        super().__init__()
        if activation not in _ACTIVATIONS:
            raise ValueError(
                f"gated_rms_norm: unsupported activation {activation!r}; "
                f"expected one of {sorted(_ACTIVATIONS)}"
            )
        self.eps = eps
        self.norm_before_gate = norm_before_gate
        self.activation = activation

    def forward(self, x: torch.Tensor, weight: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        act = _ACTIVATIONS[self.activation]
        xf, wf, gate = x.float(), weight.float(), act(z.float())
        if self.norm_before_gate:
            inv_rms = torch.rsqrt(xf.square().mean(dim=-1, keepdim=True) + self.eps)
            out = xf * inv_rms * wf * gate
        else:
            gated = xf * gate
            inv_rms = torch.rsqrt(gated.square().mean(dim=-1, keepdim=True) + self.eps)
            out = gated * inv_rms * wf
        return out.to(x.dtype)


def make_inputs(
    *, device: torch.device, generator: torch.Generator, rows: int, hidden_size: int
) -> dict[str, torch.Tensor]:
    """x: 0.02*N(0,1); weight: 0.02*N(0,1) + 1; z: N(0,1) (not scaled); bf16, in that order."""
    x = randn_bf16((rows, hidden_size), device=device, generator=generator, scale=0.02)
    weight = randn_bf16((hidden_size,), device=device, generator=generator, scale=0.02) + 1.0
    z = randn_bf16((rows, hidden_size), device=device, generator=generator)
    return {"x": x, "weight": weight, "z": z}


def work(init_kwargs: Mapping[str, Any], input_kwargs: Mapping[str, Any]) -> Work:
    """W = R(8H + 1); Q_read = 4RH + 2H; Q_write = 2RH."""
    rows, hidden = int(input_kwargs["rows"]), int(input_kwargs["hidden_size"])
    return Work(
        w_flops={"bf16": rows * (8 * hidden + 1)},
        q_read=4 * rows * hidden + 2 * hidden,
        q_write=2 * rows * hidden,
    )


SPEC = OperatorSpec(
    slug="gated_rms_norm",
    atrex_id="atrex_014",
    model_class=Model,
    input_maker=make_inputs,
    work_model=work,
    policy=BF16_POLICY,
    dtype="bf16",
    phase="prefill/decode",
)
