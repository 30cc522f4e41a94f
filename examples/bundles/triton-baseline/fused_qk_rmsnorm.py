"""Per-head RMSNorm of the q and k heads of packed QKV rows in Triton; v heads are copied.

The packed rows are viewed as (tokens * heads, head_size) head rows; a program takes a
block of head rows and picks each row's weight (q, k, or none for v) from its head index.
Two rounding points, as the reference: the normalised value is rounded to the dtype,
then multiplied by the weight and rounded again.
"""

import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def _fused_qk_rmsnorm_kernel(
    x_ptr,
    q_weight_ptr,
    k_weight_ptr,
    out_ptr,
    n_rows,
    heads_per_token,
    q_heads,
    k_heads,
    head_size,
    eps,
    ROWS: tl.constexpr,
    BLOCK: tl.constexpr,
):
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    col_mask = cols < head_size
    mask = (rows < n_rows)[:, None] & col_mask[None, :]
    offsets = rows[:, None] * head_size + cols[None, :]
    raw = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    x = raw.to(tl.float32)
    inv_rms = tl.rsqrt(tl.sum(x * x, axis=1) / head_size + eps)
    normalised = (x * inv_rms[:, None]).to(raw.dtype).to(tl.float32)
    q_weight = tl.load(q_weight_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    k_weight = tl.load(k_weight_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    head = rows % heads_per_token
    is_q = (head < q_heads)[:, None]
    is_v = (head >= q_heads + k_heads)[:, None]
    weight = tl.where(is_q, q_weight[None, :], k_weight[None, :])
    out = (weight * normalised).to(out_ptr.dtype.element_ty)
    tl.store(out_ptr + offsets, tl.where(is_v, raw, out), mask=mask)


class Model(nn.Module):
    def __init__(
        self, head_num: int, kv_head_num: int, size_per_head: int = 128, eps: float = 1e-6
    ) -> None:
        super().__init__()
        self.head_num = head_num
        self.kv_head_num = kv_head_num
        self.size_per_head = size_per_head
        self.eps = eps

    def forward(
        self, hidden_states: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor
    ) -> torch.Tensor:
        heads_per_token = self.head_num + 2 * self.kv_head_num
        head_size = self.size_per_head
        expected = heads_per_token * head_size
        if hidden_states.shape[-1] != expected:
            raise ValueError(
                f"fused_qk_rmsnorm: rows are {hidden_states.shape[-1]} wide, expected "
                f"(head_num + 2 * kv_head_num) * size_per_head = {expected}"
            )
        packed = hidden_states.contiguous()
        out = torch.empty(packed.shape, dtype=packed.dtype, device=packed.device)
        n_rows = packed.numel() // head_size
        if n_rows > 0:
            block = triton.next_power_of_2(head_size)
            # Decode shapes have one token (40 to 80 head rows): a few programs of 32 rows.
            rows_per_program = max(1, 4096 // block)
            _fused_qk_rmsnorm_kernel[(triton.cdiv(n_rows, rows_per_program),)](
                packed,
                q_weight,
                k_weight,
                out,
                n_rows,
                heads_per_token,
                self.head_num,
                self.kv_head_num,
                head_size,
                self.eps,
                ROWS=rows_per_program,
                BLOCK=block,
                num_warps=min(max(rows_per_program * block // 512, 1), 16),
            )
        return out.view(hidden_states.shape)
