"""``linear_sigmoid_mul`` baseline: ``torch.sigmoid(F.linear(x, W, b)) * post_mul_mat`` in bf16.

Differs from the reference: the sigmoid and the product run on bf16 tensors (each computed
in fp32 and rounded once) instead of on fp32 copies with one final rounding. Still correct:
the gate is the same bf16 ``linear``; the extra rounding of the sigmoid moves an output by
at most about one bf16 step, well inside the bf16 rule (rtol 2**-6).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional


class Model(nn.Module):
    """out = sigmoid(linear(hidden_states, weight, bias)) * post_mul_mat."""

    def forward(
        self,
        hidden_states: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor,
        post_mul_mat: torch.Tensor,
    ) -> torch.Tensor:
        return torch.sigmoid(functional.linear(hidden_states, weight, bias)) * post_mul_mat
