"""Residual add + RMSNorm in Triton: one row per program; stats from the rounded sum."""

import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def _fused_add_rms_norm_kernel(
    x_ptr,
    residual_ptr,
    weight_ptr,
    out_ptr,
    residual_out_ptr,
    row_stride,
    hidden,
    eps,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < hidden
    offsets = row * row_stride + cols
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    residual = tl.load(residual_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    summed = (x + residual).to(residual_out_ptr.dtype.element_ty)
    tl.store(residual_out_ptr + offsets, summed, mask=mask)
    summed_f32 = summed.to(tl.float32)
    inv_rms = tl.rsqrt(tl.sum(summed_f32 * summed_f32, axis=0) / hidden + eps)
    weight = tl.load(weight_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    out = summed_f32 * inv_rms * weight
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)


class Model(nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(
        self, x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        hidden = x.shape[-1]
        x_rows = x.reshape(-1, hidden).contiguous()
        residual_rows = residual.reshape(-1, hidden).contiguous()
        out = torch.empty_like(x_rows)
        residual_out = torch.empty_like(x_rows)
        if x_rows.shape[0] > 0:
            block = triton.next_power_of_2(hidden)
            _fused_add_rms_norm_kernel[(x_rows.shape[0],)](
                x_rows,
                residual_rows,
                weight,
                out,
                residual_out,
                x_rows.stride(0),
                hidden,
                self.eps,
                BLOCK=block,
                num_warps=min(max(block // 256, 1), 16),
            )
        return {"out": out.view(x.shape), "residual": residual_out.view(x.shape)}
