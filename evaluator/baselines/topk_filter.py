"""``topk_filter`` baseline: the k-th largest value per row by ``torch.topk``, then
``masked_fill`` below it with -inf.

Differs from the reference: nothing of substance; this is the top-k warper of common
sampling code, which the reference already is (unsorted ``topk`` here, whose k-th value is
its minimum). Still correct: the threshold is the same k-th largest value (duplicates
counted), every value tied with it is kept, and ``logits < tau`` masks as the reference does
(a NaN logit stays NaN).
"""

from __future__ import annotations

import torch
from torch import nn


class Model(nn.Module):
    """out = logits.masked_fill(logits < kth_largest(logits), -inf)."""

    def __init__(self, top_k: int = 50) -> None:
        super().__init__()
        if top_k < 1:
            raise ValueError(f"topk_filter: top_k must be at least 1, got {top_k}")
        self.top_k = top_k

    def forward(self, logits: torch.Tensor) -> torch.Tensor:
        keep = min(self.top_k, logits.shape[-1])
        threshold = torch.topk(logits, keep, dim=-1).values[..., -1:]
        return logits.masked_fill(logits < threshold, float("-inf"))
