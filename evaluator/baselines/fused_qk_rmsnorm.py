"""``fused_qk_rmsnorm`` baseline: split the packed row into q, k, v heads, ``F.rms_norm``
each of q and k (no weight), multiply by the weight, concatenate.

Differs from the reference: the library's ``rms_norm`` on the fp16 heads instead of the
written-out fp32 formula, and a ``torch.cat`` of the three parts instead of a clone written
into. Still correct: ``rms_norm`` normalises in fp32 and rounds once to fp16 (the
reference's first rounding); the weight product of two fp16 tensors rounds once (its
second); v is copied unchanged.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional


class Model(nn.Module):
    """cat(q_weight * rms_norm(q), k_weight * rms_norm(k), v) per head."""

    def __init__(
        self, head_num: int, kv_head_num: int, size_per_head: int = 128, eps: float = 1e-6
    ) -> None:
        super().__init__()
        self.head_num = head_num
        self.kv_head_num = kv_head_num
        self.size_per_head = size_per_head
        self.eps = eps

    def forward(
        self, hidden_states: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor
    ) -> torch.Tensor:
        dim = self.size_per_head
        heads = hidden_states.view(hidden_states.shape[0], -1, dim)
        q, k, v = heads.split([self.head_num, self.kv_head_num, self.kv_head_num], dim=1)
        q = functional.rms_norm(q, (dim,), eps=self.eps) * q_weight
        k = functional.rms_norm(k, (dim,), eps=self.eps) * k_weight
        return torch.cat((q, k, v), dim=1).view(hidden_states.shape)
