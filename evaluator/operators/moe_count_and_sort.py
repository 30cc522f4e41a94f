"""``moe_count_and_sort`` (atrex_020): count routed slots per expert, prefix sum, sorted slots.

With f_p = topk_ids[p // k, p % k] (p = 0 .. M-1, M = T*k): expert_token_counts[e] =
#{p : f_p = e}; cumsum = [0, c_0, c_0 + c_1, ..., M] (E + 1 entries); sorted_token_ids = for
e = 0 .. E-1, the ascending positions p with f_p = e, concatenated (a stable sort of the
positions by expert). All int32, exact.

Departures from upstream: none. (vLLM's kernel places slots with atomics, so its order
inside an expert is nondeterministic; the Atrex-Bench reference, and this one, define it as
ascending.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from evaluator.operators._moe_gemm import EXACT_POLICY, expert_groups, uniform_topk_ids
from evaluator.operators.base import OperatorSpec, Work

CHECKER_NOTES = """\
Output: a dict with exactly the keys "sorted_token_ids" (T*k,), "expert_token_counts" (E,)
and "cumsum" (E+1,), all int32, compared exactly (torch.equal). The order inside an expert is
ascending by flattened position (the atomics-based order of vLLM's kernel is not accepted);
no order freedom remains."""


class Model(nn.Module):
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


def make_inputs(
    *,
    device: torch.device,
    generator: torch.Generator,
    token_count: int,
    top_k: int,
    num_experts: int,
) -> dict[str, torch.Tensor]:
    """topk_ids: (T, k) int32, independent uniform integers in [0, E)."""
    return {
        "topk_ids": uniform_topk_ids(
            token_count=token_count,
            top_k=top_k,
            num_experts=num_experts,
            device=device,
            generator=generator,
        )
    }


def work(init_kwargs: Mapping[str, Any], input_kwargs: Mapping[str, Any]) -> Work:
    """W = {}; Q_read = 4Tk; Q_write = 4Tk + 8E + 4 (sorted ids, counts, cumsum)."""
    tokens, top_k = int(input_kwargs["token_count"]), int(input_kwargs["top_k"])
    experts = int(input_kwargs.get("num_experts", init_kwargs.get("num_experts", 128)))
    return Work(w_flops={}, q_read=4 * tokens * top_k, q_write=4 * tokens * top_k + 8 * experts + 4)


SPEC = OperatorSpec(
    slug="moe_count_and_sort",
    atrex_id="atrex_020",
    model_class=Model,
    input_maker=make_inputs,
    work_model=work,
    policy=EXACT_POLICY,
    dtype="int32",
    phase="prefill/decode",
    output_names=("sorted_token_ids", "expert_token_counts", "cumsum"),
)
