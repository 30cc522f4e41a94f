"""``moe_topk_gating_softmax`` (atrex_022): MoE router, softmax then top-k (optionally grouped).

p = softmax over the experts of the fp32 logits (max-subtracted, fp32). With
num_expert_groups G > 0 and topk_group g > 0: the experts form G contiguous groups of E/G,
a group's score is its largest p, the g best groups are kept and p is set to 0 outside them.
Then the top_k largest p per row, sorted in descending order: topk_weights (T, k) fp32 are
the probabilities themselves (no renormalisation over the selected k), topk_ids (T, k)
int32. (With grouping and top_k > g*E/G, zero probabilities are selected and their ids
follow torch.topk's tie order; no published shape groups.)

Departures from upstream: none.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from evaluator.operators.base import FP32_POLICY, OperatorSpec, Work

CHECKER_NOTES = """\
Output: a dict with exactly the keys "topk_weights" (T, k) fp32 and "topk_ids" (T, k) int32.
topk_weights: FP32_POLICY (softmax rounding differs at ~1e-7 relative). topk_ids: exact, in
descending order of weight; the only freedom is the order among entries whose reference
weights are exactly equal (probability ~0 with N(0,1) logits): if ids differ, accept the row
only when the differing positions hold equal reference weights and the candidate's id
multiset for that weight value is the same. Weights must not be renormalised (a
renormalised answer is off by the factor sum of the selected p, far outside FP32_POLICY)."""


class Model(nn.Module):
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


def make_inputs(
    *, device: torch.device, generator: torch.Generator, token_count: int, num_experts: int
) -> dict[str, torch.Tensor]:
    """gating_output: (T, E) fp32, N(0,1)."""
    return {
        "gating_output": torch.randn(
            (token_count, num_experts), dtype=torch.float32, device=device, generator=generator
        )
    }


def work(init_kwargs: Mapping[str, Any], input_kwargs: Mapping[str, Any]) -> Work:
    """W = T(4E - 1) (softmax); Q_read = 4TE; Q_write = 8Tk (fp32 weights + int32 ids)."""
    tokens, experts = int(input_kwargs["token_count"]), int(input_kwargs["num_experts"])
    top_k = int(init_kwargs.get("top_k", input_kwargs.get("top_k", 8)))
    return Work(
        w_flops={"fp32": tokens * (4 * experts - 1)},
        q_read=4 * tokens * experts,
        q_write=8 * tokens * top_k,
    )


SPEC = OperatorSpec(
    slug="moe_topk_gating_softmax",
    atrex_id="atrex_022",
    model_class=Model,
    input_maker=make_inputs,
    work_model=work,
    policy=FP32_POLICY,
    dtype="fp32",
    phase="prefill/decode",
    output_names=("topk_weights", "topk_ids"),
)
