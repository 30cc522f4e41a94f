"""Packed QKV split (+ optional bias) with NeoX rotary on q and k, in Triton.

One program per (token, head) of the packed row [q heads | k heads | v heads]: it adds the
bias (rounded once to the dtype, as the reference), rotates the first rope_dim dims of a
q or k head (rotate-half form, each dim paired with the one half a rotary width away)
and copies the rest; v heads are copied. Angles are f32(position) * 1 / base^(2i / d)
in fp32. On CUDA the power, cosine and sine are libdevice's (CUDA's powf, cosf, sinf,
what PyTorch uses); the CPU interpreter has no libdevice, so there the power is taken
in fp64 and rounded to fp32, and cosine and sine are numpy's fp32 ones.
"""

import torch
import triton
import triton.language as tl
from torch import nn
from triton.language.extra import libdevice


@triton.jit
def _fused_qkv_rope_kernel(
    qkv_ptr,
    bias_ptr,
    positions_ptr,
    q_ptr,
    k_ptr,
    v_ptr,
    qkv_row_stride,
    num_heads,
    num_kv_heads,
    head_dim,
    rope_dim,
    rope_base,
    HAS_BIAS: tl.constexpr,
    LIBDEVICE: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    token = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1)
    if head < num_heads:
        dst = q_ptr + (token * num_heads + head) * head_dim
        rope_limit = rope_dim
    elif head < num_heads + num_kv_heads:
        dst = k_ptr + (token * num_kv_heads + head - num_heads) * head_dim
        rope_limit = rope_dim
    else:
        dst = v_ptr + (token * num_kv_heads + head - num_heads - num_kv_heads) * head_dim
        rope_limit = 0
    half = rope_dim // 2
    dims = tl.arange(0, BLOCK_D)
    in_head = dims < head_dim
    rotated = dims < rope_limit
    first_half = dims < half
    partner = tl.where(first_half, dims + half, dims - half)
    src = qkv_ptr + token * qkv_row_stride + head * head_dim
    x = tl.load(src + dims, mask=in_head, other=0.0)
    x_partner = tl.load(src + partner, mask=rotated, other=0.0)
    if HAS_BIAS:
        bias_row = bias_ptr + head * head_dim
        bias = tl.load(bias_row + dims, mask=in_head, other=0.0).to(tl.float32)
        bias_partner = tl.load(bias_row + partner, mask=rotated, other=0.0).to(tl.float32)
        x = (x.to(tl.float32) + bias).to(x.dtype)
        x_partner = (x_partner.to(tl.float32) + bias_partner).to(x.dtype)
    x = x.to(tl.float32)
    x_partner = x_partner.to(tl.float32)
    frequency = tl.where(first_half, dims, dims - half)
    exponent = tl.math.div_rn((2 * frequency).to(tl.float32), rope_dim * 1.0)
    if LIBDEVICE:
        power = libdevice.pow(tl.full([BLOCK_D], rope_base, tl.float32), exponent)
    else:
        log_base = tl.log(tl.full([BLOCK_D], rope_base, tl.float32).to(tl.float64))
        power = tl.exp(exponent.to(tl.float64) * log_base).to(tl.float32)
    inverse_frequency = tl.math.div_rn(1.0, power)
    position = tl.load(positions_ptr + token).to(tl.float32)
    angle = position * inverse_frequency
    if LIBDEVICE:
        cos = libdevice.cos(angle)
        sin = libdevice.sin(angle)
    else:
        cos = tl.cos(angle)
        sin = tl.sin(angle)
    signed_partner = tl.where(first_half, -x_partner, x_partner)
    out = tl.where(rotated, x * cos + signed_partner * sin, x)
    tl.store(dst + dims, out.to(dst.dtype.element_ty), mask=in_head)


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
        if qkv.stride(-1) != 1:
            qkv = qkv.contiguous()
        q = torch.empty((tokens, heads, dim), dtype=qkv.dtype, device=qkv.device)
        k = torch.empty((tokens, kv_heads, dim), dtype=qkv.dtype, device=qkv.device)
        v = torch.empty((tokens, kv_heads, dim), dtype=qkv.dtype, device=qkv.device)
        if tokens > 0 and dim > 0:
            _fused_qkv_rope_kernel[(tokens, heads + 2 * kv_heads)](
                qkv,
                qkv if qkv_bias is None else qkv_bias,
                positions,
                q,
                k,
                v,
                qkv.stride(0),
                heads,
                kv_heads,
                dim,
                self.rope_dim,
                float(self.rope_base),
                HAS_BIAS=qkv_bias is not None,
                LIBDEVICE=qkv.device.type == "cuda",
                BLOCK_D=triton.next_power_of_2(dim),
                num_warps=1,
            )
        return q, k, v
