"""torch.compile baseline for ``layer_norm`` (the reference's arithmetic).

On CUDA the forward runs through ``torch.compile`` (inductor); on CPU it runs eagerly (see
the bundle's README). A baseline, not a submission: the harness counts inductor kernels and
PyTorch ops as fallback.
"""

from __future__ import annotations

import functools

import torch
from torch import nn

EPS = 1e-5


class Reference(nn.Module):
    """out = rnd_bf16((x - mean) / sqrt(biased var + 1e-5) * f32(weight) + f32(bias))."""

    def forward(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        if x.dim() == 0:
            return x.clone()  # upstream returns a 0-d input unchanged; never generated
        xf = x.float()
        centred = xf - xf.mean(dim=-1, keepdim=True)
        variance = centred.square().mean(dim=-1, keepdim=True)
        normalised = centred / torch.sqrt(variance + EPS)
        return (normalised * weight.float() + bias.float()).to(x.dtype)


@functools.cache
def _compiled_forward():
    return torch.compile(Reference.forward)


class Model(Reference):
    def forward(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        if x.is_cuda:
            return _compiled_forward()(self, x, weight, bias)
        return super().forward(x, weight, bias)
