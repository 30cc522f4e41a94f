"""``moe_sum_reduce`` (atrex_021): sum the top-k weighted expert outputs of each token.

out[t] = rnd_bf16((sum_s f32(expert_outputs[t, s, :])) * routed_scaling_factor): an fp32
sum over the k slots, then the multiply, then one rounding. The fp32 accumulation is done
by the reduction itself, so no fp32 copy of the (T, k, H) input is made.

Departures from upstream: none: computes what the release computes (the fp32 sum, the
multiply by the factor, one rounding) on the same inputs. Upstream sums an fp32 copy of the
input; here the reduction upcasts as it reads, which gives the same values (bit for bit on
CPU and on the H200) without the (T, k, H) fp32 temporary. Only the check differs: the
portal's bf16 rule (docs/decisions.md 5) instead of upstream's fixed allclose.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from evaluator.operators.base import BF16_POLICY, OperatorSpec, Work, randn_bf16


class Model(nn.Module):
    """out = rnd_bf16(sum over dim 1 in fp32 * routed_scaling_factor); (T, k, H) -> (T, H)."""

    def __init__(self, routed_scaling_factor: float = 1.0) -> None:
        super().__init__()
        self.routed_scaling_factor = routed_scaling_factor

    def forward(self, expert_outputs: torch.Tensor) -> torch.Tensor:
        summed = expert_outputs.sum(dim=1, dtype=torch.float32)
        return (summed * self.routed_scaling_factor).to(expert_outputs.dtype)


def make_inputs(
    *,
    device: torch.device,
    generator: torch.Generator,
    token_count: int,
    top_k: int,
    hidden_size: int,
) -> dict[str, torch.Tensor]:
    """expert_outputs: (T, k, H) bf16, 0.02*N(0,1) in bf16."""
    expert_outputs = randn_bf16(
        (token_count, top_k, hidden_size), device=device, generator=generator, scale=0.02
    )
    return {"expert_outputs": expert_outputs}


def work(init_kwargs: Mapping[str, Any], input_kwargs: Mapping[str, Any]) -> Work:
    """W = kTH ((k-1)TH adds + TH multiplies); Q_read = 2TkH; Q_write = 2TH."""
    tokens, top_k = int(input_kwargs["token_count"]), int(input_kwargs["top_k"])
    hidden = int(input_kwargs["hidden_size"])
    return Work(
        w_flops={"bf16": top_k * tokens * hidden},
        q_read=2 * tokens * top_k * hidden,
        q_write=2 * tokens * hidden,
    )


SPEC = OperatorSpec(
    slug="moe_sum_reduce",
    atrex_id="atrex_021",
    model_class=Model,
    input_maker=make_inputs,
    work_model=work,
    policy=BF16_POLICY,
    dtype="bf16",
    phase="prefill/decode",
)
