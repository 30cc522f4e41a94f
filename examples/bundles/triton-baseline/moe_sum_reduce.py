"""Sum of the top-k expert outputs of each token in Triton: (T, k, H) -> (T, H), fp32 sum.

A program takes one token and a block of columns, loads its k slots as one 2-D tile and
reduces over the slots.
"""

import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def _moe_sum_reduce_kernel(
    x_ptr,
    out_ptr,
    top_k,
    hidden,
    x_token_stride,
    x_slot_stride,
    out_token_stride,
    scaling,
    BLOCK_K: tl.constexpr,
    BLOCK_H: tl.constexpr,
):
    token = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    slots = tl.arange(0, BLOCK_K)
    col_mask = cols < hidden
    mask = (slots < top_k)[:, None] & col_mask[None, :]
    offsets = token * x_token_stride + slots[:, None] * x_slot_stride + cols[None, :]
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    out = tl.sum(x, axis=0) * scaling
    out_offsets = token * out_token_stride + cols
    tl.store(out_ptr + out_offsets, out.to(out_ptr.dtype.element_ty), mask=col_mask)


class Model(nn.Module):
    def __init__(self, routed_scaling_factor: float = 1.0) -> None:
        super().__init__()
        self.routed_scaling_factor = routed_scaling_factor

    def forward(self, expert_outputs: torch.Tensor) -> torch.Tensor:
        tokens, top_k, hidden = expert_outputs.shape
        x = expert_outputs
        if x.stride(-1) != 1:
            x = x.contiguous()
        out = torch.empty((tokens, hidden), dtype=x.dtype, device=x.device)
        if tokens > 0 and hidden > 0:
            block_k = triton.next_power_of_2(max(top_k, 1))
            # About 4096 elements per program (8 slots x 512 columns at k = 8).
            block_h = min(triton.next_power_of_2(hidden), max(16, 4096 // block_k))
            _moe_sum_reduce_kernel[(tokens, triton.cdiv(hidden, block_h))](
                x,
                out,
                top_k,
                hidden,
                x.stride(0),
                x.stride(1),
                out.stride(0),
                float(self.routed_scaling_factor),
                BLOCK_K=block_k,
                BLOCK_H=block_h,
                num_warps=min(max(block_k * block_h // 512, 1), 8),
            )
        return out
