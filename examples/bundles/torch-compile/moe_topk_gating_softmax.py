"""torch.compile baseline for ``moe_topk_gating_softmax`` (the reference's arithmetic).

On CUDA the forward runs through ``torch.compile`` (inductor); on CPU it runs eagerly (see
the bundle's README). A baseline, not a submission: the harness counts inductor kernels and
PyTorch ops as fallback.
"""

from __future__ import annotations

import functools

import torch
from torch import nn


class Reference(nn.Module):
    """softmax(logits) in fp32, optional group limiting, then sorted top-k (weights, int32 ids)."""

    def __init__(self, top_k: int, num_expert_groups: int = 0, topk_group: int = 0) -> None:
        super().__init__()
        self.top_k = top_k
        self.num_expert_groups = num_expert_groups
        self.topk_group = topk_group

    def forward(self, gating_output: torch.Tensor) -> dict[str, torch.Tensor]:
        probs = torch.softmax(gating_output.float(), dim=-1)
        groups, keep = self.num_expert_groups, self.topk_group
        if groups > 0 and keep > 0:
            tokens, experts = probs.shape
            if experts % groups:
                raise ValueError(
                    f"moe_topk_gating_softmax: {experts} experts do not split into {groups} groups"
                )
            grouped = probs.reshape(tokens, groups, experts // groups)
            best = torch.topk(grouped.amax(dim=-1), keep, dim=-1).indices
            kept = torch.zeros((tokens, groups), dtype=torch.bool, device=probs.device)
            kept.scatter_(1, best, True)
            probs = torch.where(kept.unsqueeze(-1), grouped, torch.zeros_like(grouped)).reshape(
                tokens, experts
            )
        weights, ids = torch.topk(probs, self.top_k, dim=-1, largest=True, sorted=True)
        return {"topk_weights": weights, "topk_ids": ids.to(torch.int32)}


@functools.cache
def _compiled_forward():
    return torch.compile(Reference.forward)


class Model(Reference):
    def forward(self, gating_output: torch.Tensor) -> dict[str, torch.Tensor]:
        if gating_output.is_cuda:
            return _compiled_forward()(self, gating_output)
        return super().forward(gating_output)
