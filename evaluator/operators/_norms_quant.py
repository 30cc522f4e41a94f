"""Helpers shared by the norm and FP8-quantisation operators (group ``norms_quant``).

The portal's FP8 convention (docs/decisions.md 2 and 3): every fp8 tensor is
``torch.float8_e4m3fn`` with a maximum of 448, and references clamp to +-448 before each
fp8 cast, so a reference never produces NaN.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import torch

from evaluator.operators.base import CorrectnessPolicy, Fp8CodePolicy

FP8_DTYPE = torch.float8_e4m3fn
FP8_MAX = 448.0

# A scale is one fp32 rounding from the reference's at most; purely relative, since the
# smallest scales (1e-12 / 448) are far below any absolute floor.
FP8_SCALE_POLICY = CorrectnessPolicy(rtol=1e-6, atol_scale=0.0, atol_floor=0.0)

# The share of codes one e4m3fn step off that a quantisation leaf may have.
FP8_STEP_SHARE = 1e-3

# The element rule the fp8 operators' CHECKER_NOTES refer to (Fp8CodePolicy implements it).
FP8_MATCH_RULE = """\
codes: placed on the e4m3fn grid (its 253 finite values in order, -0 = +0), every candidate
code must equal the reference's or be one step away, and at most 0.1% of the codes may be
one step away (rounding ties of a different, valid fp32 order); that share is reported as
the shape's mismatch_share. The scales are checked first, under their own rule; then,
dequantised with each side's own scale s, every element satisfies |q_c*s_c - q_r*s_r| <=
step(q_r)*s_r + |s_c - s_r|*|q_c| with step(q) = 2**(max(floor(log2|q|), -6) - 3) (2**-9
for q = 0), as one grid step is at most step(q_r); the largest dequantised error is
reported as max_abs_error. A NaN code fails
(references saturate at +-448, never NaN). Compared in row chunks, never as whole float64
copies."""


def fp8_quant_policy(
    codes: str,
    scales: str,
    *,
    scale_rule: CorrectnessPolicy = FP8_SCALE_POLICY,
    others: CorrectnessPolicy = FP8_SCALE_POLICY,
) -> CorrectnessPolicy:
    """The policy of a quantisation operator: leaf ``codes`` compared as fp8 codes with the
    scales of leaf ``scales``, which follows ``scale_rule``; any other leaf ``others``."""
    return replace(
        others,
        leaves=(
            (codes, Fp8CodePolicy(max_step_share=FP8_STEP_SHARE, scale_leaf=scales)),
            (scales, scale_rule),
        ),
    )


# Rows per chunk are chosen so that one chunk holds about this many elements; the fp32
# temporaries of a chunk then stay near 1 GiB whatever the shape.
CHUNK_ELEMENTS = 1 << 28


def divide_by_fp8_max(amax: torch.Tensor) -> torch.Tensor:
    """``amax / 448`` as a correctly rounded fp32 division, on every device.

    PyTorch's CUDA kernel turns division by a Python number into multiplication by its
    reciprocal (``1/448`` is inexact in fp32), while the CPU kernel divides; dividing by
    a tensor on the same device is a true IEEE division on both (docs/decisions.md 10).
    """
    return amax / torch.full((), FP8_MAX, dtype=torch.float32, device=amax.device)


def saturating_fp8(values: torch.Tensor, *, in_place: bool = False) -> torch.Tensor:
    """Clamp fp32 values to +-448, then cast (round to nearest even) to float8_e4m3fn.

    ``in_place=True`` clamps ``values`` itself (a temporary the caller owns) instead of a
    copy: the same codes, without a second fp32 tensor of its size.
    """
    clamped = values.clamp_(-FP8_MAX, FP8_MAX) if in_place else values.clamp(-FP8_MAX, FP8_MAX)
    return clamped.to(FP8_DTYPE)


def row_chunks(rows: int, row_length: int) -> Iterator[slice]:
    """Consecutive row slices covering ``rows`` rows, each about CHUNK_ELEMENTS elements."""
    step = max(1, CHUNK_ELEMENTS // max(1, row_length))
    for start in range(0, rows, step):
        yield slice(start, min(rows, start + step))
