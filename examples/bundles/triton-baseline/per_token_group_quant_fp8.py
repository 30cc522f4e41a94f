"""Per-token, per-group (1 x g) dynamic FP8 (e4m3fn, max 448) quantisation in Triton.

The groups of a row are g consecutive columns; a program takes a block of groups (rows
of a 2-D tile g wide), so any row count and hidden size are covered by one flat launch.
s = max(max|x_group| / 448, 1e-10) and q = fp8(x / s), both correctly rounded divisions,
saturated to +-448 before the cast. On CUDA the cast is the hardware's round-to-nearest-
even conversion; the Triton CPU interpreter's own fp32 -> fp8 cast truncates and loses the
carry into the exponent, so there (SOFTWARE_ROUNDING) the value is first rounded to the
e4m3 grid in fp32 integer arithmetic, which makes the interpreter's cast exact.
"""

import torch
import triton
import triton.language as tl
from torch import nn


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
def _group_quant_kernel(
    x_ptr,
    q_ptr,
    scale_ptr,
    n_groups,
    groups_per_row,
    group_size,
    x_row_stride,
    q_row_stride,
    GROUPS: tl.constexpr,
    BLOCK_G: tl.constexpr,
    SOFTWARE_ROUNDING: tl.constexpr,
):
    groups = tl.program_id(0).to(tl.int64) * GROUPS + tl.arange(0, GROUPS)
    row = groups // groups_per_row
    first_col = (groups % groups_per_row) * group_size
    cols = tl.arange(0, BLOCK_G)
    mask = (groups < n_groups)[:, None] & (cols < group_size)[None, :]
    x_offsets = (row * x_row_stride + first_col)[:, None] + cols[None, :]
    x = tl.load(x_ptr + x_offsets, mask=mask, other=0.0).to(tl.float32)
    group_max = tl.max(tl.abs(x), axis=1)
    scale = tl.maximum(tl.math.div_rn(group_max, 448.0), 1e-10)
    q = _saturating_e4m3(tl.math.div_rn(x, scale[:, None]), SOFTWARE_ROUNDING)
    q_offsets = (row * q_row_stride + first_col)[:, None] + cols[None, :]
    tl.store(q_ptr + q_offsets, q, mask=mask)
    # scales is a contiguous (T, H / g): group number = flat index.
    tl.store(scale_ptr + groups, scale, mask=groups < n_groups)


class Model(nn.Module):
    def __init__(self, group_size: int) -> None:
        super().__init__()
        self.group_size = group_size

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        tokens, hidden = x.shape
        group = self.group_size
        if hidden % group:
            raise ValueError(
                f"per_token_group_quant_fp8: hidden size {hidden} is not a "
                f"multiple of group_size {group}"
            )
        if x.stride(-1) != 1:
            x = x.contiguous()
        groups_per_row = hidden // group
        quantized = torch.empty((tokens, hidden), dtype=torch.float8_e4m3fn, device=x.device)
        scales = torch.empty((tokens, groups_per_row), dtype=torch.float32, device=x.device)
        n_groups = tokens * groups_per_row
        if n_groups > 0:
            block_g = triton.next_power_of_2(group)
            groups_per_program = max(1, 4096 // block_g)
            _group_quant_kernel[(triton.cdiv(n_groups, groups_per_program),)](
                x,
                quantized,
                scales,
                n_groups,
                groups_per_row,
                group,
                x.stride(0),
                quantized.stride(0),
                GROUPS=groups_per_program,
                BLOCK_G=block_g,
                SOFTWARE_ROUNDING=x.device.type != "cuda",
                num_warps=min(max(groups_per_program * block_g // 512, 1), 16),
            )
        return {"quantized": quantized, "scales": scales}
