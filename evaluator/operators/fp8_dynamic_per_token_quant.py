"""``fp8_dynamic_per_token_quant`` (atrex_007): dynamic per-token symmetric FP8 quantisation.

Per row, in fp32: m = max(max_j |x_j|, 1e-12); scale = m / 448 (a true fp32 division,
docs/decisions.md 10); inv = 1 / scale (fp32 reciprocal); q_j = fp8(clamp(x_j * inv, -448,
448)). Multiplying by the reciprocal, not dividing by the scale, is part of the contract
(dividing changes about 0.01% of the codes). Returns a **tuple** (q, scale) with a
one-dimensional scale (T,).

Departures from upstream (docs/decisions.md 2): upstream quantises to
``float8_e4m3fnuz`` with max 240 on every platform; here q is ``float8_e4m3fn`` and the
maximum is 448 (scale = m / 448, clamp to +-448). The clamp before the cast is upstream's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from evaluator.operators._norms_quant import (
    FP8_MATCH_RULE,
    divide_by_fp8_max,
    fp8_quant_policy,
    saturating_fp8,
)
from evaluator.operators.base import OperatorSpec, Work, randn_bf16

CHECKER_NOTES = f"""\
Output: a tuple (q, scale); a candidate returns a tuple or list of two (upstream files do).
scale: (T,) fp32, one dimension (not (T, 1)); each is max(max|x_row|, 1e-12) / 448, exact up
to one fp32 rounding: compare with rtol 1e-6 (on CUDA, PyTorch divides by the Python number
448 as a multiplication by fl(1/448), which is one ulp off in about half the rows).
q: (T, H) float8_e4m3fn; {FP8_MATCH_RULE}
An all-zero or constant q fails: every row's maximum maps to +-448.
POLICY below implements these rules (scale: FP8_SCALE_POLICY; q: Fp8CodePolicy with the
scale of output[1]).
"""

POLICY = fp8_quant_policy("output[0]", "output[1]")


class Model(nn.Module):
    """q = fp8(clamp(x * (1 / (max(max|x|, 1e-12) / 448)), +-448)); returns (q, scale (T,))."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # A copy of x, multiplied and clamped in place (same codes, one temporary).
        xf = x.to(torch.float32, copy=True)
        row_max = xf.abs().amax(dim=-1).clamp_min(1e-12)
        scale = divide_by_fp8_max(row_max)
        inverse = torch.reciprocal(scale)
        q = saturating_fp8(xf.mul_(inverse.unsqueeze(-1)), in_place=True)
        return q, scale


def make_inputs(
    *, device: torch.device, generator: torch.Generator, token_count: int, hidden_size: int
) -> dict[str, torch.Tensor]:
    """x: (T, H) bf16, N(0,1) drawn directly in bf16."""
    return {"x": randn_bf16((token_count, hidden_size), device=device, generator=generator)}


def work(init_kwargs: Mapping[str, Any], input_kwargs: Mapping[str, Any]) -> Work:
    """W = T(H + 1) (key fp8_e4m3); Q_read = 2TH; Q_write = TH + 4T."""
    tokens, hidden = int(input_kwargs["token_count"]), int(input_kwargs["hidden_size"])
    return Work(
        w_flops={"fp8_e4m3": tokens * (hidden + 1)},
        q_read=2 * tokens * hidden,
        q_write=tokens * hidden + 4 * tokens,
    )


SPEC = OperatorSpec(
    slug="fp8_dynamic_per_token_quant",
    atrex_id="atrex_007",
    model_class=Model,
    input_maker=make_inputs,
    work_model=work,
    policy=POLICY,
    dtype="fp8_e4m3",
    phase="prefill/decode",
    output_names=("output[0]", "output[1]"),
)
