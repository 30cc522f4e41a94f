"""Helpers shared by the norm and FP8-quantisation operators (group ``norms_quant``).

The portal's FP8 convention (``atrex-bench/DECISIONS.md`` 2 and 3): every fp8 tensor is
``torch.float8_e4m3fn`` with a maximum of 448, and references clamp to +-448 before each
fp8 cast, so a reference never produces NaN.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from evaluator.operators.base import CorrectnessPolicy

FP8_DTYPE = torch.float8_e4m3fn
FP8_MAX = 448.0

# Until the correctness checker implements the per-operator rule written in each fp8
# operator's CHECKER_NOTES, this is the closest existing policy: bf16-like tolerances on
# every leaf (fp8 codes are compared as numbers, so a code one step off is a mismatch)
# and at most 0.1% of the elements of a leaf may miss.
FP8_QUANT_POLICY = CorrectnessPolicy(rtol=2.0**-6, atol_scale=1e-3, max_mismatch_share=1e-3)

# The element rule the fp8 operators' CHECKER_NOTES refer to.
FP8_MATCH_RULE = """\
codes: in float64, every element must satisfy |q_c*s_c - q_r*s_r| <= step(q_r)*s_r +
|s_c - s_r|*|q_c| (dequantised values, each side with its own scale s, within one e4m3
code step at the reference code's magnitude: step(q) = 2**(max(floor(log2|q|), -6) - 3),
2**-9 for q = 0), and the share of elements whose code differs from the reference's must
be at most 0.1% (report it). A NaN code fails (references saturate at +-448, never NaN).
Compare large tensors in row chunks, not as whole float64 copies."""

# Rows per chunk are chosen so that one chunk holds about this many elements; the fp32
# temporaries of a chunk then stay near 1 GiB whatever the shape.
CHUNK_ELEMENTS = 1 << 28


def divide_by_fp8_max(amax: torch.Tensor) -> torch.Tensor:
    """``amax / 448`` as a correctly rounded fp32 division, on every device.

    PyTorch's CUDA kernel turns division by a Python number into multiplication by its
    reciprocal (``1/448`` is inexact in fp32), while the CPU kernel divides; dividing by
    a tensor on the same device is a true IEEE division on both.
    """
    return amax / torch.full((), FP8_MAX, dtype=torch.float32, device=amax.device)


def saturating_fp8(values: torch.Tensor) -> torch.Tensor:
    """Clamp fp32 values to +-448, then cast (round to nearest even) to float8_e4m3fn."""
    return values.clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE)


def row_chunks(rows: int, row_length: int) -> Iterator[slice]:
    """Consecutive row slices covering ``rows`` rows, each about CHUNK_ELEMENTS elements."""
    step = max(1, CHUNK_ELEMENTS // max(1, row_length))
    for start in range(0, rows, step):
        yield slice(start, min(rows, start + step))
