"""Dynamic per-token FP8 (e4m3fn, max 448) quantisation in Triton: a block of rows per program.

scale = max(max|x|, 1e-12) / 448 (a correctly rounded division), q = fp8(x * (1 / scale)),
saturated to +-448 before the cast. On CUDA the cast is the hardware's round-to-nearest-
even conversion; the Triton CPU interpreter's own fp32 -> fp8 cast truncates and loses the
carry into the exponent, so there (SOFTWARE_ROUNDING) the value is first rounded to the
e4m3 grid in fp32 integer arithmetic, which makes the interpreter's cast exact.
"""

import torch
import triton
import triton.language as tl
from torch import nn

FP8_MAX = 448.0


@triton.jit
def _saturating_e4m3(values, SOFTWARE_ROUNDING: tl.constexpr):
    """Clamp fp32 values to +-448 and cast to float8_e4m3fn, rounding to nearest even."""
    values = tl.minimum(tl.maximum(values, -448.0), 448.0)
    if SOFTWARE_ROUNDING:
        bits = values.to(tl.int32, bitcast=True)
        # Normal range: keep 3 mantissa bits (round half to even; a carry moves the exponent).
        normal = ((bits + 0x7FFFF + ((bits >> 20) & 1)) & -1048576).to(tl.float32, bitcast=True)
        # Subnormal range (|v| < 2**-6): multiples of 2**-9, by an fp32 add of 1.5 * 2**14
        # on |v|; the sign goes back on as a bit so that -0 stays -0.
        magnitude = (tl.abs(values) + 24576.0) - 24576.0
        sign = bits & -2147483648
        subnormal = (magnitude.to(tl.int32, bitcast=True) | sign).to(tl.float32, bitcast=True)
        values = tl.where(tl.abs(values) < 0.015625, subnormal, normal)
    return values.to(tl.float8e4nv)


@triton.jit
def _per_token_quant_kernel(
    x_ptr,
    q_ptr,
    scale_ptr,
    n_rows,
    hidden,
    x_row_stride,
    q_row_stride,
    ROWS: tl.constexpr,
    BLOCK: tl.constexpr,
    SOFTWARE_ROUNDING: tl.constexpr,
):
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    row_mask = rows < n_rows
    mask = row_mask[:, None] & (cols < hidden)[None, :]
    x = tl.load(x_ptr + rows[:, None] * x_row_stride + cols[None, :], mask=mask, other=0.0)
    x = x.to(tl.float32)
    row_max = tl.maximum(tl.max(tl.abs(x), axis=1), 1e-12)
    scale = tl.math.div_rn(row_max, 448.0)
    inverse = tl.math.div_rn(1.0, scale)
    q = _saturating_e4m3(x * inverse[:, None], SOFTWARE_ROUNDING)
    tl.store(q_ptr + rows[:, None] * q_row_stride + cols[None, :], q, mask=mask)
    tl.store(scale_ptr + rows, scale, mask=row_mask)


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = x.shape[-1]
        rows = x.reshape(-1, hidden)
        q = torch.empty(rows.shape, dtype=torch.float8_e4m3fn, device=x.device)
        scale = torch.empty(rows.shape[0], dtype=torch.float32, device=x.device)
        if rows.shape[0] > 0 and hidden > 0:
            block = triton.next_power_of_2(hidden)
            # Whole rows in registers, about 4096 elements per program (1 row from 4096 up).
            rows_per_program = max(1, 4096 // block)
            _per_token_quant_kernel[(triton.cdiv(rows.shape[0], rows_per_program),)](
                rows,
                q,
                scale,
                rows.shape[0],
                hidden,
                rows.stride(0),
                q.stride(0),
                ROWS=rows_per_program,
                BLOCK=block,
                SOFTWARE_ROUNDING=x.device.type != "cuda",
                num_warps=min(max(rows_per_program * block // 512, 1), 16),
            )
        return q.view(x.shape), scale.view(x.shape[:-1])
