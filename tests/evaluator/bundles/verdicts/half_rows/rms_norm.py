"""Partially correct: the Triton baseline's RMSNorm over the first half of the rows only
(rounded up), the rest left as torch.empty gave them. Right at a one-row shape, wrong at
every other: the operator is incorrect as a whole and scores 0 (docs/decisions.md 12)."""

import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def _rms_norm_kernel(
    x_ptr,
    weight_ptr,
    out_ptr,
    n_rows,
    x_row_stride,
    out_row_stride,
    hidden,
    eps,
    BLOCK: tl.constexpr,
    ROWS: tl.constexpr,
):
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    col_mask = cols < hidden
    mask = (rows < n_rows)[:, None] & col_mask[None, :]
    x = tl.load(x_ptr + rows[:, None] * x_row_stride + cols[None, :], mask=mask, other=0.0).to(
        tl.float32
    )
    inv_rms = tl.rsqrt(tl.sum(x * x, axis=1) / hidden + eps)
    weight = tl.load(weight_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    out = x * inv_rms[:, None] * weight[None, :]
    tl.store(
        out_ptr + rows[:, None] * out_row_stride + cols[None, :],
        out.to(out_ptr.dtype.element_ty),
        mask=mask,
    )


def launch_config(hidden: int) -> tuple[int, int, int]:
    """(BLOCK, ROWS, num_warps) for rows of ``hidden`` elements.

    A tile of at least 1024 elements a program (rows under 1024 elements take several to a
    program) and a warp per 512 elements of it: of 16 (rows, warps) pairs timed on the H200
    at each hidden size of the v1 suite, the best or within 1 % of it wherever a shape moves
    more than 1 MB (bench/rms_norm_configs.py, results/2026-12-02-h200-session8/); at
    hidden 1152 it moves the largest shape from 0.62 to 0.80 of the roofline, at hidden 128
    from 0.18 to 0.82.
    """
    block = triton.next_power_of_2(hidden)
    rows = max(1, 1024 // block)
    num_warps = min(max(rows * block // 512, 1), 16)
    return block, rows, num_warps


def launch(rows: torch.Tensor, weight: torch.Tensor, out: torch.Tensor, eps: float, config) -> None:
    """Normalise the 2-D ``rows`` into ``out`` with ``config`` = (BLOCK, ROWS, num_warps)."""
    block, rows_per_program, num_warps = config
    n_rows, hidden = rows.shape
    _rms_norm_kernel[(triton.cdiv(n_rows, rows_per_program),)](
        rows,
        weight,
        out,
        n_rows,
        rows.stride(0),
        out.stride(0),
        hidden,
        eps,
        BLOCK=block,
        ROWS=rows_per_program,
        num_warps=num_warps,
    )


class Model(nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        hidden = x.shape[-1]
        rows = x.reshape(-1, hidden)
        out = torch.empty_like(rows)
        if rows.shape[0] > 0:
            half = (rows.shape[0] + 1) // 2
            launch(rows[:half], weight, out[:half], self.eps, launch_config(hidden))
        return out.view(x.shape)
