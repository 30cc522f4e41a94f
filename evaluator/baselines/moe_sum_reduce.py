"""``moe_sum_reduce`` baseline: ``expert_outputs.sum(dim=1) * routed_scaling_factor`` in bf16.

Differs from the reference: the sum is returned in bf16 and then scaled in bf16 (two
roundings) instead of being scaled in fp32 before one rounding. Still correct: the bf16 sum
accumulates in fp32 and rounds once, and the scaling adds at most one more rounding (none
for the factor 1.0), inside the bf16 rule.
"""

from __future__ import annotations

import torch
from torch import nn


class Model(nn.Module):
    """out = expert_outputs.sum(dim=1) * routed_scaling_factor, (T, k, H) -> (T, H)."""

    def __init__(self, routed_scaling_factor: float = 1.0) -> None:
        super().__init__()
        self.routed_scaling_factor = routed_scaling_factor

    def forward(self, expert_outputs: torch.Tensor) -> torch.Tensor:
        summed = expert_outputs.sum(dim=1)
        if self.routed_scaling_factor == 1.0:
            return summed
        return summed * self.routed_scaling_factor
