"""Packed QKV split (+ optional bias) with NeoX rotary on q and k, in Triton.

The packed rows [q heads | k heads | v heads] are viewed as (tokens * heads, head_dim) head
rows; a program takes a block of head rows. It adds the bias (rounded once to the dtype,
as the reference), rotates the first rope_dim dims of q and k heads (rotate-half form: dim
a pairs with a +- rope_dim/2) and copies the rest and the v heads into one (T, H + 2Hkv, D)
buffer; q, k and v are views of it. Angles are f32(position) * 1 / base^(2i / d) in fp32.
On CUDA the power, cosine and sine are libdevice's (CUDA's powf, cosf, sinf, what PyTorch
uses); the CPU interpreter has no libdevice, so there the power is taken in fp64 and
rounded to fp32, and cosine and sine are numpy's fp32 ones; and since the interpreter's
fp32 -> bf16 cast truncates, bf16 results are rounded to nearest even in integer
arithmetic first (SOFTWARE_ROUNDING; two rounding points would otherwise drift two steps).
"""

import torch
import triton
import triton.language as tl
from torch import nn
from triton.language.extra import libdevice


@triton.jit
def _round_to(values, dtype: tl.constexpr, SOFTWARE_ROUNDING: tl.constexpr):
    """fp32 -> dtype, round half to even (bf16 by integer arithmetic where asked)."""
    if SOFTWARE_ROUNDING:
        if dtype == tl.bfloat16:
            bits = values.to(tl.int32, bitcast=True)
            rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & -65536
            values = rounded.to(tl.float32, bitcast=True)
    return values.to(dtype)


@triton.jit
def _fused_qkv_rope_kernel(
    qkv_ptr,
    bias_ptr,
    positions_ptr,
    out_ptr,
    n_rows,
    heads_per_token,
    rotated_heads,
    qkv_row_stride,
    head_dim,
    rope_dim,
    rope_base,
    HAS_BIAS: tl.constexpr,
    LIBDEVICE: tl.constexpr,
    SOFTWARE_ROUNDING: tl.constexpr,
    ROWS: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    row_mask = rows < n_rows
    token = rows // heads_per_token
    head = rows % heads_per_token
    dims = tl.arange(0, BLOCK_D)[None, :]
    in_head = row_mask[:, None] & (dims < head_dim)
    rotated = in_head & (head < rotated_heads)[:, None] & (dims < rope_dim)
    half = rope_dim // 2
    first_half = dims < half
    partner = tl.where(first_half, dims + half, dims - half)
    src = qkv_ptr + (token * qkv_row_stride + head * head_dim)[:, None]
    x = tl.load(src + dims, mask=in_head, other=0.0)
    x_partner = tl.load(src + partner, mask=rotated, other=0.0)
    if HAS_BIAS:
        bias_row = bias_ptr + (head * head_dim)[:, None]
        bias = tl.load(bias_row + dims, mask=in_head, other=0.0).to(tl.float32)
        bias_partner = tl.load(bias_row + partner, mask=rotated, other=0.0).to(tl.float32)
        x = _round_to(x.to(tl.float32) + bias, x.dtype, SOFTWARE_ROUNDING)
        x_partner = _round_to(x_partner.to(tl.float32) + bias_partner, x.dtype, SOFTWARE_ROUNDING)
    x = x.to(tl.float32)
    x_partner = x_partner.to(tl.float32)
    # Inverse frequencies: one (1, BLOCK_D) row per program.
    frequency = tl.where(first_half, dims, dims - half)
    exponent = tl.math.div_rn((2 * frequency).to(tl.float32), rope_dim * 1.0)
    if LIBDEVICE:
        power = libdevice.pow(tl.full([1, BLOCK_D], rope_base, tl.float32), exponent)
    else:
        log_base = tl.log(tl.full([1, BLOCK_D], rope_base, tl.float32).to(tl.float64))
        power = tl.exp(exponent.to(tl.float64) * log_base).to(tl.float32)
    inverse_frequency = tl.math.div_rn(1.0, power)
    position = tl.load(positions_ptr + token, mask=row_mask, other=0).to(tl.float32)
    angle = position[:, None] * inverse_frequency
    if LIBDEVICE:
        cos = libdevice.cos(angle)
        sin = libdevice.sin(angle)
    else:
        cos = tl.cos(angle)
        sin = tl.sin(angle)
    signed_partner = tl.where(first_half, -x_partner, x_partner)
    out = tl.where(rotated, x * cos + signed_partner * sin, x)
    out_offsets = rows[:, None] * head_dim + dims
    out = _round_to(out, out_ptr.dtype.element_ty, SOFTWARE_ROUNDING)
    tl.store(out_ptr + out_offsets, out, mask=in_head)


class Model(nn.Module):
    def __init__(
        self,
        num_heads: int,
        num_kv_heads: int,
        head_dim: int,
        rope_dim: int,
        rope_base: float = 10000.0,
    ) -> None:
        super().__init__()
        if rope_dim % 2 or not 0 < rope_dim <= head_dim:
            raise ValueError(
                f"fused_qkv_rope: rope_dim {rope_dim} must be even and in (0, {head_dim}]"
            )
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = head_dim
        self.rope_dim = rope_dim
        self.rope_base = rope_base

    def forward(
        self, qkv: torch.Tensor, positions: torch.Tensor, qkv_bias: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        tokens = qkv.shape[0]
        heads, kv_heads, dim = self.num_heads, self.num_kv_heads, self.head_dim
        heads_per_token = heads + 2 * kv_heads
        if qkv.stride(-1) != 1:
            qkv = qkv.contiguous()
        out = torch.empty((tokens, heads_per_token, dim), dtype=qkv.dtype, device=qkv.device)
        n_rows = tokens * heads_per_token
        if n_rows > 0 and dim > 0:
            block_d = triton.next_power_of_2(dim)
            # Decode (one token, 48 to 80 heads of 128): a few programs of 32 head rows.
            rows_per_program = max(1, 4096 // block_d)
            _fused_qkv_rope_kernel[(triton.cdiv(n_rows, rows_per_program),)](
                qkv,
                qkv if qkv_bias is None else qkv_bias,
                positions,
                out,
                n_rows,
                heads_per_token,
                heads + kv_heads,
                qkv.stride(0),
                dim,
                self.rope_dim,
                float(self.rope_base),
                HAS_BIAS=qkv_bias is not None,
                LIBDEVICE=qkv.device.type == "cuda",
                SOFTWARE_ROUNDING=qkv.device.type != "cuda",
                ROWS=rows_per_program,
                BLOCK_D=block_d,
                num_warps=min(max(rows_per_program * block_d // 512, 1), 16),
            )
        return out[:, :heads], out[:, heads : heads + kv_heads], out[:, heads + kv_heads :]
