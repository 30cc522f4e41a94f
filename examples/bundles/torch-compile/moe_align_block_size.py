"""torch.compile baseline for ``moe_align_block_size`` (the reference's arithmetic).

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
    """Expert-sorted slot positions, each expert's group padded with M to a multiple of bs."""

    def __init__(self, block_size: int, num_experts: int) -> None:
        super().__init__()
        self.block_size = block_size
        self.num_experts = num_experts

    def forward(self, topk_ids: torch.Tensor) -> dict[str, torch.Tensor]:
        device = topk_ids.device
        flat = topk_ids.reshape(-1)
        total = flat.numel()
        positions, counts = expert_groups(flat, self.num_experts)
        blocks = (counts + self.block_size - 1) // self.block_size
        padded = blocks * self.block_size
        group_start = torch.cumsum(padded, 0) - padded  # first slot of each expert's group
        count_start = torch.cumsum(counts, 0) - counts  # first sorted position of each expert
        length = int(padded.sum())
        sorted_token_ids = torch.full((length,), total, dtype=torch.int32, device=device)
        experts_sorted = flat.to(torch.int64)[positions]
        rank = torch.arange(total, device=device) - count_start[experts_sorted]
        sorted_token_ids[group_start[experts_sorted] + rank] = positions.to(torch.int32)
        expert_ids = torch.repeat_interleave(
            torch.arange(self.num_experts, device=device), blocks
        ).to(torch.int32)
        num_tokens_post_pad = torch.tensor([length], dtype=torch.int32, device=device)
        return {
            "sorted_token_ids": sorted_token_ids,
            "expert_ids": expert_ids,
            "num_tokens_post_pad": num_tokens_post_pad,
        }


@functools.cache
def _compiled_forward():
    return torch.compile(Reference.forward)


class Model(Reference):
    def forward(self, topk_ids: torch.Tensor) -> dict[str, torch.Tensor]:
        if topk_ids.is_cuda:
            return _compiled_forward()(self, topk_ids)
        return super().forward(topk_ids)
