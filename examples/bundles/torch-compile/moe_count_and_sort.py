"""torch.compile baseline for ``moe_count_and_sort`` (the reference's arithmetic).

On CUDA the forward runs through ``torch.compile`` (inductor); on CPU it runs eagerly (see
the bundle's README). A baseline, not a submission: the harness counts inductor kernels and
PyTorch ops as fallback.
"""

from __future__ import annotations

import functools

import torch
from torch import nn


def expert_groups(flat_ids: torch.Tensor, num_experts: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Stable sort of positions by expert id: (positions, counts per expert), both int64.

    ``flat_ids`` are the flattened expert ids f_p (p = 0 .. M-1); the result lists, for
    e = 0 .. E-1 in order, the ascending positions p with f_p = e. Ids outside [0, E)
    raise, since they name no expert.
    """
    ids = flat_ids.to(torch.int64)
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= num_experts):
        raise ValueError(
            f"expert ids must lie in [0, {num_experts}), got [{int(ids.min())}, {int(ids.max())}]"
        )
    positions = torch.sort(ids, stable=True).indices
    counts = torch.bincount(ids, minlength=num_experts)
    return positions, counts


class Reference(nn.Module):
    """Stable sort of flattened slot positions by expert id, with counts and their prefix sum."""

    def __init__(self, num_experts: int = 128, block_size: int = 128) -> None:
        super().__init__()
        self.num_experts = num_experts
        self.block_size = block_size  # stored, unused

    def forward(self, topk_ids: torch.Tensor) -> dict[str, torch.Tensor]:
        positions, counts = expert_groups(topk_ids.reshape(-1), self.num_experts)
        cumsum = torch.zeros(self.num_experts + 1, dtype=torch.int64, device=topk_ids.device)
        cumsum[1:] = torch.cumsum(counts, 0)
        return {
            "sorted_token_ids": positions.to(torch.int32),
            "expert_token_counts": counts.to(torch.int32),
            "cumsum": cumsum.to(torch.int32),
        }


@functools.cache
def _compiled_forward():
    return torch.compile(Reference.forward)


class Model(Reference):
    def forward(self, topk_ids: torch.Tensor) -> dict[str, torch.Tensor]:
        if topk_ids.is_cuda:
            return _compiled_forward()(self, topk_ids)
        return super().forward(topk_ids)
