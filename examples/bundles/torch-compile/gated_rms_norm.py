"""torch.compile baseline for ``gated_rms_norm`` (the reference's arithmetic).

On CUDA the forward runs through ``torch.compile`` (inductor); on CPU it runs eagerly (see
the bundle's README). A baseline, not a submission: the harness counts inductor kernels and
PyTorch ops as fallback.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional

_ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "silu": functional.silu,
    "swish": functional.silu,
    "sigmoid": torch.sigmoid,
}


class Reference(nn.Module):
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


@functools.cache
def _compiled_forward():
    return torch.compile(Reference.forward)


class Model(Reference):
    def forward(self, x: torch.Tensor, weight: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        if x.is_cuda:
            return _compiled_forward()(self, x, weight, z)
        return super().forward(x, weight, z)
