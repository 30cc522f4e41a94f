"""``block_scaled_mm`` (atrex_002): W8A8 FP8 GEMM with DeepSeek-style block scales, fp32 out.

a (m, k) and b (n, k) are float8_e4m3fn; a_scales (m, k/group_k) holds one fp32 scale per
row and K-group, b_scales (n/group_n, k/group_k) one per group_n x group_k block of b. In
fp32: out[i, j] = sum over K-groups kappa (in increasing order) of
(d_kappa[i, j] * a_scales[i, kappa]) * b_scales[j // group_n, kappa], where d_kappa is the
true-fp32 GEMM of the group's columns (f32(a) . f32(b)^T). Rows are processed in chunks of
16,384, so the largest shape (m 704,512: a 5.8 GB output) needs about 0.3 GB of fp32
temporaries besides its inputs and output.

Departures from upstream (docs/decisions.md 2, 3): none of substance. The format is
float8_e4m3fn with max 448 as upstream; the input quantisation already clamps to +-448
before the cast. The scale divisions amax / 448 are true fp32 divisions on every device
(docs/decisions.md 10; on CUDA, PyTorch would otherwise multiply by the inexact reciprocal
of 448).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from evaluator.operators._moe_gemm import (
    block_max,
    divide_by_fp8_max,
    saturating_fp8,
    scale_blocks,
    strict_fp32_matmul,
)
from evaluator.operators.base import CorrectnessPolicy, OperatorSpec, Work

# Rows of a drawn in one random call (only matters for the RNG stream) and rows per
# chunk of the reference GEMM (no effect on values).
DRAW_CHUNK_ROWS = 65_536
GEMM_CHUNK_ROWS = 16_384

# fp32 output of ~+-200 (mean |out| ~36). A different fp32 accumulation order differs at
# ~1e-6 relative; Hopper fp8 tensor-core MMA keeps ~14 bits inside each 128-deep K-group
# before the fp32 promotion, ~1e-4 relative. rtol 2**-11 admits both; a bf16-rounded
# result (2**-9 relative) or one wrong block scale fails.
POLICY = CorrectnessPolicy(rtol=2.0**-11, atol_scale=2.0**-13)

CHECKER_NOTES = """\
Output: one tensor `out`, (m, n) fp32; compare in float64, elementwise
|cand - ref| <= 2**-13 * max|ref| + 2**-11 * |ref| (POLICY of this module), no element may
fail. The largest output is 704,512 x 2,048 fp32 (5.8 GB): compare in row chunks rather than
as one float64 copy (a float64 copy of ref and cand would need 23 GB)."""


class Model(nn.Module):
    """out = sum_kappa (GEMM_kappa(f32 a, f32 b) * a_scales[:, kappa]) * b_scales[j/gn, kappa]."""

    def __init__(self, group_n: int, group_k: int) -> None:
        super().__init__()
        self.group_n = group_n
        self.group_k = group_k

    def forward(
        self, a: torch.Tensor, b: torch.Tensor, a_scales: torch.Tensor, b_scales: torch.Tensor
    ) -> torch.Tensor:
        m, k = a.shape
        n = b.shape[0]
        group_n, group_k = self.group_n, self.group_k
        if k % group_k or n % group_n:
            raise ValueError(
                f"block_scaled_mm: (n, k) = ({n}, {k}) is not a multiple of "
                f"(group_n, group_k) = ({group_n}, {group_k})"
            )
        k_groups = k // group_k
        b_f32 = b.float()
        # b_scales broadcast along n: column j uses b_scales[j // group_n, kappa].
        column_scales = b_scales.float().repeat_interleave(group_n, dim=0)  # (n, Kb)
        out = torch.empty((m, n), dtype=torch.float32, device=a.device)
        with strict_fp32_matmul():
            for start in range(0, m, GEMM_CHUNK_ROWS):
                rows = slice(start, min(m, start + GEMM_CHUNK_ROWS))
                a_f32 = a[rows].float()
                row_scales = a_scales[rows].float()
                acc: torch.Tensor | None = None
                for kappa in range(k_groups):
                    cols = slice(kappa * group_k, (kappa + 1) * group_k)
                    term = a_f32[:, cols] @ b_f32[:, cols].T
                    term.mul_(row_scales[:, kappa : kappa + 1])
                    term.mul_(column_scales[:, kappa])
                    acc = term if acc is None else acc.add_(term)
                if acc is None:  # k == 0: an empty sum
                    acc = torch.zeros(
                        (rows.stop - rows.start, n), dtype=torch.float32, device=a.device
                    )
                out[rows] = acc
        return out


def _quantise_b(
    b_raw: torch.Tensor, group_n: int, group_k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Weights: per block, scale = max(max(signed values) / 448, 1e-10); saturating cast.
    ``b_raw`` (fp32, the caller's draw, not used after) is divided and clamped in place."""
    scales = divide_by_fp8_max(block_max(b_raw, group_n, group_k, signed=True)).clamp_min(1e-10)
    scaled = scale_blocks(b_raw, scales, group_n, group_k, divide=True, in_place=True)
    return saturating_fp8(scaled, in_place=True), scales


def _quantise_a(a_raw: torch.Tensor, group_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Activations: per row and K-group, scale = max(max|x| / 448, 1e-10); saturating cast.
    ``a_raw`` (fp32, the caller's draw, not used after) is divided and clamped in place."""
    scales = divide_by_fp8_max(block_max(a_raw, 1, group_k)).clamp_min(1e-10)
    scaled = scale_blocks(a_raw, scales, 1, group_k, divide=True, in_place=True)
    return saturating_fp8(scaled, in_place=True), scales


def make_inputs(
    *,
    device: torch.device,
    generator: torch.Generator,
    m: int,
    n: int,
    k: int,
    group_n: int,
    group_k: int,
) -> dict[str, torch.Tensor]:
    """Draw B_raw ~ N(0,1) fp32 (n, k) once, then A_raw ~ N(0,1) fp32 in 65,536-row chunks.

    b_scales: per group_n x group_k block, max(max of the SIGNED values / 448, 1e-10) (so in
    blocks whose most negative value outweighs the maximum, those entries saturate at
    -448); b = fp8(clamp(B_raw / scale, +-448)). a_scales: per row and K-group,
    max(max|A_raw| / 448, 1e-10); a = fp8(clamp(A_raw / scale, +-448)).
    """
    if k % group_k or n % group_n:
        raise ValueError(
            f"block_scaled_mm: (n, k) = ({n}, {k}) is not a multiple of "
            f"(group_n, group_k) = ({group_n}, {group_k})"
        )
    b_raw = torch.randn((n, k), dtype=torch.float32, device=device, generator=generator)
    b, b_scales = _quantise_b(b_raw, group_n, group_k)
    del b_raw
    a = torch.empty((m, k), dtype=b.dtype, device=device)
    a_scales = torch.empty((m, k // group_k), dtype=torch.float32, device=device)
    for start in range(0, m, DRAW_CHUNK_ROWS):
        stop = min(m, start + DRAW_CHUNK_ROWS)
        a_raw = torch.randn(
            (stop - start, k), dtype=torch.float32, device=device, generator=generator
        )
        a[start:stop], a_scales[start:stop] = _quantise_a(a_raw, group_k)
    return {"a": a, "b": b, "a_scales": a_scales, "b_scales": b_scales}


def work(init_kwargs: Mapping[str, Any], input_kwargs: Mapping[str, Any]) -> Work:
    """W = 2mnk + (3Kb - 1)mn; Q_read = mk + nk + 4m*Kb + 4(n/gn)Kb; Q_write = 4mn."""
    m, n, k = (int(input_kwargs[name]) for name in ("m", "n", "k"))
    group_n = int(input_kwargs.get("group_n", init_kwargs.get("group_n", 128)))
    group_k = int(input_kwargs.get("group_k", init_kwargs.get("group_k", 128)))
    k_groups = k // group_k
    return Work(
        w_flops={"fp8_e4m3": 2 * m * n * k + (3 * k_groups - 1) * m * n},
        q_read=m * k + n * k + 4 * m * k_groups + 4 * (n // group_n) * k_groups,
        q_write=4 * m * n,
    )


SPEC = OperatorSpec(
    slug="block_scaled_mm",
    atrex_id="atrex_002",
    model_class=Model,
    input_maker=make_inputs,
    work_model=work,
    policy=POLICY,
    dtype="fp8_e4m3",
    phase="prefill/decode",
)
