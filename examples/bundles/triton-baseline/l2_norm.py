"""L2 normalisation in Triton: a block of rows per program, each row whole in registers."""

import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def _l2_norm_kernel(
    x_ptr,
    out_ptr,
    n_rows,
    hidden,
    x_row_stride,
    out_row_stride,
    eps,
    ROWS: tl.constexpr,
    BLOCK: tl.constexpr,
):
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    mask = (rows < n_rows)[:, None] & (cols < hidden)[None, :]
    x = tl.load(x_ptr + rows[:, None] * x_row_stride + cols[None, :], mask=mask, other=0.0)
    x = x.to(tl.float32)
    # eps is added to the sum of squares (FLA l2norm), not to the mean.
    inv_norm = tl.rsqrt(tl.sum(x * x, axis=1) + eps)
    out = x * inv_norm[:, None]
    out_offsets = rows[:, None] * out_row_stride + cols[None, :]
    tl.store(out_ptr + out_offsets, out.to(out_ptr.dtype.element_ty), mask=mask)


def launch_shape(hidden: int) -> tuple[int, int, int]:
    """(BLOCK, rows per program, num_warps): about 4096 elements per program at least."""
    block = triton.next_power_of_2(hidden)
    rows = max(1, 4096 // block)
    return block, rows, min(max(rows * block // 512, 1), 16)


class Model(nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.hidden_size = hidden_size  # part of the interface; the rows carry their size
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = x.shape[-1]
        rows = x.reshape(-1, hidden)
        out = torch.empty(rows.shape, dtype=x.dtype, device=x.device)
        if rows.shape[0] > 0 and hidden > 0:
            block, rows_per_program, num_warps = launch_shape(hidden)
            _l2_norm_kernel[(triton.cdiv(rows.shape[0], rows_per_program),)](
                rows,
                out,
                rows.shape[0],
                hidden,
                rows.stride(0),
                out.stride(0),
                self.eps,
                ROWS=rows_per_program,
                BLOCK=block,
                num_warps=num_warps,
            )
        return out.view(x.shape)
