"""``linear_sigmoid_mul`` (atrex_017): sigmoid of a linear gate times a bf16 tensor.

gate = rnd_bf16(hidden_states . weight^T + bias): a bf16 GEMM with fp32 accumulation, the
bias added before the single rounding (PyTorch's bf16 ``linear``); out =
rnd_bf16(sigmoid(f32(gate)) * f32(post_mul_mat)). Returns (T, N) bf16.

Departures from upstream: none.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn
from torch.nn import functional

from evaluator.operators.base import BF16_POLICY, OperatorSpec, Work, randn_bf16

CHECKER_NOTES = """\
Output: one tensor `out`, (T, N) bf16. Outputs are small (|out| <~ 0.035), so the comparison
must be relative to the reference's magnitude (BF16_POLICY). The gate is rounded to bf16
before the sigmoid; a kernel keeping it in fp32 differs by at most ~one bf16 step."""


class Model(nn.Module):
    """out = rnd_bf16(sigmoid(f32(rnd_bf16(x . W^T + b))) * f32(post_mul_mat))."""

    def forward(
        self,
        hidden_states: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor,
        post_mul_mat: torch.Tensor,
    ) -> torch.Tensor:
        gate = functional.linear(hidden_states, weight, bias)
        return (torch.sigmoid(gate.float()) * post_mul_mat.float()).to(post_mul_mat.dtype)


def make_inputs(
    *,
    device: torch.device,
    generator: torch.Generator,
    token_count: int,
    hidden_size: int,
    out_features: int,
) -> dict[str, torch.Tensor]:
    """In order: hidden 0.02*N(0,1) (T, H); weight N(0,1)*H^-1/2 (N, H); bias 0.02*N(0,1)
    (N,); post_mul_mat 0.02*N(0,1) (T, N); all bf16."""
    hidden_states = randn_bf16(
        (token_count, hidden_size), device=device, generator=generator, scale=0.02
    )
    weight = randn_bf16(
        (out_features, hidden_size), device=device, generator=generator, scale=hidden_size**-0.5
    )
    bias = randn_bf16((out_features,), device=device, generator=generator, scale=0.02)
    post_mul_mat = randn_bf16(
        (token_count, out_features), device=device, generator=generator, scale=0.02
    )
    return {
        "hidden_states": hidden_states,
        "weight": weight,
        "bias": bias,
        "post_mul_mat": post_mul_mat,
    }


def work(init_kwargs: Mapping[str, Any], input_kwargs: Mapping[str, Any]) -> Work:
    """W = 2THN + TN; Q_read = 2TH + 2NH + 2N + 2TN; Q_write = 2TN."""
    tokens = int(input_kwargs["token_count"])
    hidden = int(input_kwargs["hidden_size"])
    features = int(input_kwargs["out_features"])
    return Work(
        w_flops={"bf16": 2 * tokens * hidden * features + tokens * features},
        q_read=2 * tokens * hidden + 2 * features * hidden + 2 * features + 2 * tokens * features,
        q_write=2 * tokens * features,
    )


SPEC = OperatorSpec(
    slug="linear_sigmoid_mul",
    atrex_id="atrex_017",
    model_class=Model,
    input_maker=make_inputs,
    work_model=work,
    policy=BF16_POLICY,
    dtype="bf16",
    phase="prefill/decode",
)
