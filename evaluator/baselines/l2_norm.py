"""``l2_norm`` baseline: the row's squared norm by ``torch.linalg.vector_norm``, then rsqrt.

Differs from the reference: the sum of squares comes from one ``vector_norm`` reduction on
the fp32 upcast (squared) instead of an explicit square and sum. Still correct: eps is added
to the sum of squares, as the reference does (``F.normalize`` would clamp the norm instead,
a different operator for small rows), and the product is rounded once.
"""

from __future__ import annotations

import torch
from torch import nn


class Model(nn.Module):
    """out = x * rsqrt(||x||^2 + eps), fp32 inside, rounded once."""

    def __init__(self, hidden_size: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        norm = torch.linalg.vector_norm(xf, dim=-1, keepdim=True)
        return (xf * torch.rsqrt(norm.square() + self.eps)).to(x.dtype)
