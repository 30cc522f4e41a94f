"""``gated_rms_norm`` baseline: ``F.rms_norm`` of the fp32 rows times the fp32 gate.

Differs from the reference: the norm (with its weight) is one ``rms_norm`` call on the fp32
upcast and the gate one ``F.silu``/``sigmoid`` call, instead of the written-out formula.
Still correct: every step is in fp32 on the upcast inputs, as in the reference, with one
rounding to bf16 at the end; only fp32 rounding inside the norm differs.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional

_ACTIVATIONS = {"silu": functional.silu, "swish": functional.silu, "sigmoid": torch.sigmoid}


class Model(nn.Module):
    """rms_norm(x) * act(z) (norm_before_gate), else rms_norm(x * act(z)); fp32, one rounding."""

    def __init__(
        self, eps: float = 1e-6, norm_before_gate: bool = True, activation: str = "silu"
    ) -> None:
        super().__init__()
        if activation not in _ACTIVATIONS:
            raise ValueError(f"gated_rms_norm: unsupported activation {activation!r}")
        self.eps = eps
        self.norm_before_gate = norm_before_gate
        self.activation = _ACTIVATIONS[activation]

    def forward(self, x: torch.Tensor, weight: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        gate = self.activation(z.float())
        shape = (x.shape[-1],)
        if self.norm_before_gate:
            out = functional.rms_norm(x.float(), shape, weight.float(), self.eps) * gate
        else:
            out = functional.rms_norm(x.float() * gate, shape, weight.float(), self.eps)
        return out.to(x.dtype)
