"""``per_token_group_quant_fp8`` (atrex_025): per-token, per-group (1 x g) dynamic FP8 quant.

Per row t and group of g consecutive columns, in fp32: s = max(max|x| / 448, 1e-10) (a true
division, then the clamp); quantized = fp8(clamp(f32(x) / s, -448, 448)) (true division by
the scale). Returns a dict {quantized (T, H) float8_e4m3fn, scales (T, H/g) fp32}.
Rows are processed in chunks so the largest shape (a 12.6 GB input) needs a few GiB of
fp32 temporaries besides its outputs.

Departures from upstream (docs/decisions.md 2): upstream picks the format by
PyTorch build, float8_e4m3fn with max 448 on CUDA and float8_e4m3fnuz with max 224 on
ROCm; here it is float8_e4m3fn with max 448 on every platform (the CUDA behaviour).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from evaluator.operators._norms_quant import (
    FP8_DTYPE,
    FP8_MATCH_RULE,
    divide_by_fp8_max,
    fp8_quant_policy,
    row_chunks,
    saturating_fp8,
)
from evaluator.operators.base import OperatorSpec, Work, randn_bf16

CHECKER_NOTES = f"""\
Output: a dict with exactly the keys "quantized" and "scales". scales: (T, H/g) fp32; each
is max(max|x_group| / 448, 1e-10), exact up to one fp32 rounding: compare with rtol 1e-6.
quantized: (T, H) float8_e4m3fn, each group of g columns with its own scale; {FP8_MATCH_RULE}
The largest shapes have 6.3 G elements.
POLICY below implements these rules (scales: FP8_SCALE_POLICY; quantized: Fp8CodePolicy
with the group scales of "scales").
"""

POLICY = fp8_quant_policy("quantized", "scales")


class Model(nn.Module):
    """s = max(max|x_group| / 448, 1e-10); quantized = fp8(clamp(x / s, +-448))."""

    def __init__(self, group_size: int) -> None:
        super().__init__()
        self.group_size = group_size

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        tokens, hidden = x.shape
        group = self.group_size
        if hidden % group:
            raise ValueError(
                f"per_token_group_quant_fp8: hidden size {hidden} is not a "
                f"multiple of group_size {group}"
            )
        groups = hidden // group
        quantized = torch.empty((tokens, hidden), dtype=FP8_DTYPE, device=x.device)
        scales = torch.empty((tokens, groups), dtype=torch.float32, device=x.device)
        for rows in row_chunks(tokens, hidden):
            # A copy of the chunk, divided and clamped in place (same codes, one temporary).
            xf = x[rows].to(torch.float32, copy=True).reshape(-1, groups, group)
            group_max = xf.abs().amax(dim=-1)
            scale = divide_by_fp8_max(group_max).clamp_min(1e-10)
            scaled = xf.div_(scale.unsqueeze(-1))
            quantized[rows] = saturating_fp8(scaled, in_place=True).reshape(-1, hidden)
            scales[rows] = scale
        return {"quantized": quantized, "scales": scales}


def make_inputs(
    *, device: torch.device, generator: torch.Generator, token_count: int, hidden_size: int
) -> dict[str, torch.Tensor]:
    """x: (T, H) bf16, N(0,1) drawn directly in bf16."""
    return {"x": randn_bf16((token_count, hidden_size), device=device, generator=generator)}


def work(init_kwargs: Mapping[str, Any], input_kwargs: Mapping[str, Any]) -> Work:
    """W = TH + TH/g (key fp8_e4m3); Q_read = 2TH; Q_write = TH + 4TH/g."""
    tokens, hidden = int(input_kwargs["token_count"]), int(input_kwargs["hidden_size"])
    group = int(init_kwargs.get("group_size", input_kwargs.get("group_size", 128)))
    groups = tokens * hidden // group
    return Work(
        w_flops={"fp8_e4m3": tokens * hidden + groups},
        q_read=2 * tokens * hidden,
        q_write=tokens * hidden + 4 * groups,
    )


SPEC = OperatorSpec(
    slug="per_token_group_quant_fp8",
    atrex_id="atrex_025",
    model_class=Model,
    input_maker=make_inputs,
    work_model=work,
    policy=POLICY,
    dtype="fp8_e4m3",
    phase="prefill/decode",
    output_names=("quantized", "scales"),
)
