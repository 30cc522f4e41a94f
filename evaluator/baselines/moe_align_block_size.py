"""``moe_align_block_size`` baseline: a stable sort of the flattened ids, per-expert padded
offsets by ``cumsum``, one scatter of the sorted positions into a buffer of sentinels.

Differs from the reference: no range check of the ids; the rank of each sorted position in
its expert's group is taken from the sorted ids' own offsets, and the block ids come from
one ``repeat_interleave``. The output lengths depend on the data, so one host
synchronisation (the padded total) is needed, as in the reference. Still correct: groups
are in expert order, positions ascending inside a group (stable sort), each group padded
with T*k to a multiple of the block size, experts without slots skipped.
"""

from __future__ import annotations

import torch
from torch import nn


class Model(nn.Module):
    """Expert-sorted positions, each expert's group padded with T*k to a multiple of bs."""

    def __init__(self, block_size: int, num_experts: int) -> None:
        super().__init__()
        self.block_size = block_size
        self.num_experts = num_experts

    def forward(self, topk_ids: torch.Tensor) -> dict[str, torch.Tensor]:
        flat = topk_ids.flatten()
        total, device, bs = flat.numel(), flat.device, self.block_size
        sorted_ids, order = torch.sort(flat, stable=True)
        sorted_ids = sorted_ids.long()
        counts = torch.bincount(flat, minlength=self.num_experts)
        blocks = (counts + bs - 1) // bs
        padded_end = torch.cumsum(blocks * bs, 0)
        length = int(padded_end[-1]) if padded_end.numel() else 0
        # Position i of the sorted list goes to its group's start plus its rank in the group.
        group_start = padded_end - blocks * bs
        rank = torch.arange(total, device=device) - (torch.cumsum(counts, 0) - counts)[sorted_ids]
        sorted_token_ids = torch.full((length,), total, dtype=torch.int32, device=device)
        sorted_token_ids[group_start[sorted_ids] + rank] = order.to(torch.int32)
        expert_ids = torch.repeat_interleave(
            torch.arange(self.num_experts, dtype=torch.int32, device=device), blocks
        )
        return {
            "sorted_token_ids": sorted_token_ids,
            "expert_ids": expert_ids,
            "num_tokens_post_pad": torch.tensor([length], dtype=torch.int32, device=device),
        }
