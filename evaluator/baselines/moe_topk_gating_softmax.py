"""``moe_topk_gating_softmax`` baseline: ``torch.softmax`` then ``torch.topk`` (group limit by
``masked_fill``).

Differs from the reference: the group limit masks the dropped groups in place with
``masked_fill`` on a (T, G, E/G) view instead of building a boolean keep mask by scatter and
a ``where`` copy, and no upcast copy is made of the fp32 logits. The reference is already
the idiomatic form otherwise. Still correct: the same fp32 softmax, the same group scores
(a group's largest probability), and the same sorted ``topk`` (its tie order too).
"""

from __future__ import annotations

import torch
from torch import nn


class Model(nn.Module):
    """softmax(logits), optional group limiting, sorted top-k (fp32 weights, int32 ids)."""

    def __init__(self, top_k: int, num_expert_groups: int = 0, topk_group: int = 0) -> None:
        super().__init__()
        self.top_k = top_k
        self.num_expert_groups = num_expert_groups
        self.topk_group = topk_group

    def forward(self, gating_output: torch.Tensor) -> dict[str, torch.Tensor]:
        probs = torch.softmax(gating_output, dim=-1, dtype=torch.float32)
        groups, keep = self.num_expert_groups, self.topk_group
        if groups > 0 and keep > 0:
            tokens, experts = probs.shape
            grouped = probs.view(tokens, groups, experts // groups)
            best = grouped.amax(dim=-1).topk(keep, dim=-1).indices
            dropped = torch.ones((tokens, groups), dtype=torch.bool, device=probs.device)
            dropped.scatter_(1, best, False)
            probs = grouped.masked_fill(dropped.unsqueeze(-1), 0.0).view(tokens, experts)
        weights, ids = torch.topk(probs, self.top_k, dim=-1)
        return {"topk_weights": weights, "topk_ids": ids.to(torch.int32)}
