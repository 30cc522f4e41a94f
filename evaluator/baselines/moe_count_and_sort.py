"""``moe_count_and_sort`` baseline: ``torch.sort(stable=True)``, ``torch.bincount`` and
``torch.cumsum`` on the flattened ids.

Differs from the reference: no range check of the ids (which costs two host
synchronisations) and the prefix sum is padded with ``F.pad`` instead of written into a
zero tensor. Still correct: a stable sort of the positions by expert id lists each
expert's positions in ascending order, which is the required order.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional


class Model(nn.Module):
    """sorted_token_ids = stable argsort of the ids; counts by bincount; cumsum padded by 0."""

    def __init__(self, num_experts: int = 128, block_size: int = 128) -> None:
        super().__init__()
        self.num_experts = num_experts
        self.block_size = block_size

    def forward(self, topk_ids: torch.Tensor) -> dict[str, torch.Tensor]:
        flat = topk_ids.flatten()
        order = torch.sort(flat, stable=True).indices
        counts = torch.bincount(flat, minlength=self.num_experts).to(torch.int32)
        cumsum = functional.pad(torch.cumsum(counts, 0, dtype=torch.int32), (1, 0))
        return {
            "sorted_token_ids": order.to(torch.int32),
            "expert_token_counts": counts,
            "cumsum": cumsum,
        }
