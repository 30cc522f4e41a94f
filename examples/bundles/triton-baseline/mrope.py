"""Multimodal rotary embedding (Qwen2-VL M-RoPE) on q and k in Triton: one token per program.

Each program loads its token's cos/sin once, taking frequency f from position axis
axis(f) (sections, or the interleaved map), then rotates every q and k head of the token
as a 2-D (heads x rotary_dim/2) tile: NeoX pairs (f, f + rd/2) or GPT-J pairs (2f, 2f+1),
fp32 inside, rounded once; dims past rotary_dim are copied.
"""

import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def _rotate_heads(
    src_ptr,
    dst_ptr,
    heads,
    head_size,
    cos,
    sin,
    half,
    rest,
    NEOX: tl.constexpr,
    BLOCK_HEADS: tl.constexpr,
    BLOCK_HALF: tl.constexpr,
    BLOCK_REST: tl.constexpr,
):
    head_index = tl.arange(0, BLOCK_HEADS)[:, None]
    frequency = tl.arange(0, BLOCK_HALF)[None, :]
    mask = (head_index < heads) & (frequency < half)
    row = head_index * head_size
    if NEOX:
        first = row + frequency
        second = row + half + frequency
    else:
        first = row + 2 * frequency
        second = first + 1
    x1 = tl.load(src_ptr + first, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(src_ptr + second, mask=mask, other=0.0).to(tl.float32)
    out1 = x1 * cos - x2 * sin
    out2 = x2 * cos + x1 * sin
    tl.store(dst_ptr + first, out1.to(dst_ptr.dtype.element_ty), mask=mask)
    tl.store(dst_ptr + second, out2.to(dst_ptr.dtype.element_ty), mask=mask)
    if BLOCK_REST > 0:
        tail = tl.arange(0, BLOCK_REST)[None, :]
        tail_mask = (head_index < heads) & (tail < rest)
        tail_offsets = row + 2 * half + tail
        copied = tl.load(src_ptr + tail_offsets, mask=tail_mask)
        tl.store(dst_ptr + tail_offsets, copied, mask=tail_mask)


@triton.jit
def _mrope_kernel(
    q_ptr,
    k_ptr,
    cos_ptr,
    sin_ptr,
    q_out_ptr,
    k_out_ptr,
    q_heads,
    k_heads,
    head_size,
    half,
    section0,
    section1,
    section2,
    q_row_stride,
    k_row_stride,
    table_axis_stride,
    table_token_stride,
    NEOX: tl.constexpr,
    INTERLEAVED: tl.constexpr,
    BLOCK_Q_HEADS: tl.constexpr,
    BLOCK_K_HEADS: tl.constexpr,
    BLOCK_HALF: tl.constexpr,
    BLOCK_REST: tl.constexpr,
):
    token = tl.program_id(0).to(tl.int64)
    frequency = tl.arange(0, BLOCK_HALF)
    if INTERLEAVED:
        remainder = frequency % 3
        axis = tl.where(
            (remainder == 1) & (frequency <= 3 * section1),
            1,
            tl.where((remainder == 2) & (frequency <= 3 * section2), 2, 0),
        )
    else:
        axis = tl.where(frequency < section0, 0, tl.where(frequency < section0 + section1, 1, 2))
    table = axis.to(tl.int64) * table_axis_stride + token * table_token_stride + frequency
    in_half = frequency < half
    cos = tl.load(cos_ptr + table, mask=in_half, other=0.0).to(tl.float32)[None, :]
    sin = tl.load(sin_ptr + table, mask=in_half, other=0.0).to(tl.float32)[None, :]
    rest = head_size - 2 * half
    _rotate_heads(
        q_ptr + token * q_row_stride,
        q_out_ptr + token * q_heads * head_size,
        q_heads,
        head_size,
        cos,
        sin,
        half,
        rest,
        NEOX,
        BLOCK_Q_HEADS,
        BLOCK_HALF,
        BLOCK_REST,
    )
    _rotate_heads(
        k_ptr + token * k_row_stride,
        k_out_ptr + token * k_heads * head_size,
        k_heads,
        head_size,
        cos,
        sin,
        half,
        rest,
        NEOX,
        BLOCK_K_HEADS,
        BLOCK_HALF,
        BLOCK_REST,
    )


class Model(nn.Module):
    def __init__(
        self,
        head_size: int,
        rotary_dim: int,
        mrope_section: list[int],
        mrope_interleaved: bool = False,
        is_neox_style: bool = True,
    ) -> None:
        super().__init__()
        if rotary_dim % 2 or not 0 < rotary_dim <= head_size:
            raise ValueError(f"mrope: rotary_dim {rotary_dim} must be even and in (0, {head_size}]")
        if len(mrope_section) != 3:
            raise ValueError(f"mrope: mrope_section needs three sizes, got {mrope_section}")
        self.head_size = head_size
        self.rotary_dim = rotary_dim
        self.mrope_section = list(mrope_section)
        self.mrope_interleaved = mrope_interleaved
        self.is_neox_style = is_neox_style

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        tokens = q.shape[0]
        head_size = self.head_size
        q_heads, k_heads = q.shape[1] // head_size, k.shape[1] // head_size
        if q.stride(-1) != 1:
            q = q.contiguous()
        if k.stride(-1) != 1:
            k = k.contiguous()
        if cos.stride(-1) != 1 or sin.stride() != cos.stride():
            cos, sin = cos.contiguous(), sin.contiguous()
        q_out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
        k_out = torch.empty(k.shape, dtype=k.dtype, device=k.device)
        if tokens > 0:
            half = self.rotary_dim // 2
            rest = head_size - self.rotary_dim
            block_q_heads = triton.next_power_of_2(max(q_heads, 1))
            block_half = triton.next_power_of_2(half)
            s0, s1, s2 = (int(s) for s in self.mrope_section)
            _mrope_kernel[(tokens,)](
                q,
                k,
                cos,
                sin,
                q_out,
                k_out,
                q_heads,
                k_heads,
                head_size,
                half,
                s0,
                s1,
                s2,
                q.stride(0),
                k.stride(0),
                cos.stride(0),
                cos.stride(1),
                NEOX=bool(self.is_neox_style),
                INTERLEAVED=bool(self.mrope_interleaved),
                BLOCK_Q_HEADS=block_q_heads,
                BLOCK_K_HEADS=triton.next_power_of_2(max(k_heads, 1)),
                BLOCK_HALF=block_half,
                BLOCK_REST=triton.next_power_of_2(rest) if rest > 0 else 0,
                num_warps=min(max(block_q_heads * block_half // 256, 1), 8),
            )
        return {"q": q_out, "k": k_out}
