"""Affine LayerNorm (eps 1e-5, biased variance) in Triton: a block of rows per program."""

import torch
import triton
import triton.language as tl
from torch import nn

EPS = 1e-5


@triton.jit
def _layer_norm_kernel(
    x_ptr,
    weight_ptr,
    bias_ptr,
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
    col_mask = cols < hidden
    mask = (rows < n_rows)[:, None] & col_mask[None, :]
    x = tl.load(x_ptr + rows[:, None] * x_row_stride + cols[None, :], mask=mask, other=0.0)
    x = x.to(tl.float32)
    mean = tl.sum(x, axis=1) / hidden
    # Masked columns must not add (0 - mean)^2 to the variance.
    centred = tl.where(mask, x - mean[:, None], 0.0)
    variance = tl.sum(centred * centred, axis=1) / hidden
    inv_std = 1.0 / tl.sqrt(variance + eps)
    weight = tl.load(weight_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    bias = tl.load(bias_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    out = centred * inv_std[:, None] * weight[None, :] + bias[None, :]
    out_offsets = rows[:, None] * out_row_stride + cols[None, :]
    tl.store(out_ptr + out_offsets, out.to(out_ptr.dtype.element_ty), mask=mask)


class Model(nn.Module):
    def forward(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        if x.dim() == 0:
            raise ValueError("layer_norm: x is 0-dimensional; give it at least one axis")
        hidden = x.shape[-1]
        rows = x.reshape(-1, hidden)
        out = torch.empty(rows.shape, dtype=x.dtype, device=x.device)
        if rows.shape[0] > 0 and hidden > 0:
            block = triton.next_power_of_2(hidden)
            rows_per_program = max(1, 4096 // block)
            _layer_norm_kernel[(triton.cdiv(rows.shape[0], rows_per_program),)](
                rows,
                weight,
                bias,
                out,
                rows.shape[0],
                hidden,
                rows.stride(0),
                out.stride(0),
                EPS,
                ROWS=rows_per_program,
                BLOCK=block,
                num_warps=min(max(rows_per_program * block // 512, 1), 16),
            )
        return out.view(x.shape)
