"""Multimodal rotary embedding (Qwen2-VL M-RoPE) on q and k in Triton.

q and k are viewed as head rows ((T * heads, head_size)); one launch per tensor, a block
of head rows per program. Frequency f takes its cos/sin from position axis axis(f) (the
sections, or the interleaved map) of its row's token; NeoX pairs (f, f + rd/2) or GPT-J
pairs (2f, 2f+1) are rotated in fp32 and rounded once; dims past rotary_dim are copied.
"""

import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def _mrope_kernel(
    x_ptr,
    cos_ptr,
    sin_ptr,
    out_ptr,
    n_rows,
    heads,
    x_row_stride,
    head_size,
    half,
    section0,
    section1,
    section2,
    table_axis_stride,
    table_token_stride,
    NEOX: tl.constexpr,
    INTERLEAVED: tl.constexpr,
    ROWS: tl.constexpr,
    BLOCK_HALF: tl.constexpr,
    BLOCK_REST: tl.constexpr,
):
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    row_mask = rows < n_rows
    token = rows // heads
    head = rows % heads
    frequency = tl.arange(0, BLOCK_HALF)[None, :]
    if INTERLEAVED:
        remainder = frequency % 3
        axis = tl.where(
            (remainder == 1) & (frequency <= 3 * section1),
            1,
            tl.where((remainder == 2) & (frequency <= 3 * section2), 2, 0),
        )
    else:
        axis = tl.where(frequency < section0, 0, tl.where(frequency < section0 + section1, 1, 2))
    mask = row_mask[:, None] & (frequency < half)
    table = axis.to(tl.int64) * table_axis_stride + token[:, None] * table_token_stride + frequency
    cos = tl.load(cos_ptr + table, mask=mask, other=0.0).to(tl.float32)
    sin = tl.load(sin_ptr + table, mask=mask, other=0.0).to(tl.float32)
    src = x_ptr + (token * x_row_stride + head * head_size)[:, None]
    dst = out_ptr + (rows * head_size)[:, None]
    if NEOX:
        first = frequency
        second = half + frequency
    else:
        first = 2 * frequency
        second = first + 1
    x1 = tl.load(src + first, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(src + second, mask=mask, other=0.0).to(tl.float32)
    out1 = x1 * cos - x2 * sin
    out2 = x2 * cos + x1 * sin
    tl.store(dst + first, out1.to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(dst + second, out2.to(out_ptr.dtype.element_ty), mask=mask)
    if BLOCK_REST > 0:
        tail = 2 * half + tl.arange(0, BLOCK_REST)[None, :]
        tail_mask = row_mask[:, None] & (tail < head_size)
        tl.store(dst + tail, tl.load(src + tail, mask=tail_mask), mask=tail_mask)


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

    def _rotate(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        head_size = self.head_size
        heads = x.shape[1] // head_size
        if x.stride(-1) != 1:
            x = x.contiguous()
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        n_rows = x.shape[0] * heads
        if n_rows == 0:
            return out
        half = self.rotary_dim // 2
        rest = head_size - self.rotary_dim
        block_half = triton.next_power_of_2(half)
        # Two halves of BLOCK_HALF per row: about 4096 elements per program.
        rows_per_program = max(1, 2048 // block_half)
        s0, s1, s2 = (int(s) for s in self.mrope_section)
        _mrope_kernel[(triton.cdiv(n_rows, rows_per_program),)](
            x,
            cos,
            sin,
            out,
            n_rows,
            heads,
            x.stride(0),
            head_size,
            half,
            s0,
            s1,
            s2,
            cos.stride(0),
            cos.stride(1),
            NEOX=bool(self.is_neox_style),
            INTERLEAVED=bool(self.mrope_interleaved),
            ROWS=rows_per_program,
            BLOCK_HALF=block_half,
            BLOCK_REST=triton.next_power_of_2(rest) if rest > 0 else 0,
            num_warps=min(max(rows_per_program * block_half // 256, 1), 16),
        )
        return out

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        if cos.stride(-1) != 1 or sin.stride() != cos.stride():
            cos, sin = cos.contiguous(), sin.contiguous()
        return {"q": self._rotate(q, cos, sin), "k": self._rotate(k, cos, sin)}
