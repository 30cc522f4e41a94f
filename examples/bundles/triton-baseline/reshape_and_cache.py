"""Scatter new keys/values into copies of a paged (flash-layout) cache, in Triton.

Two launches: one copies both whole caches into the new outputs (flat, vectorised
blocks), then one writes each token's (H, D) key and value, a block of tokens per program,
into its slot (slot_mapping[t]; negative slots are skipped). Both run on the same stream,
in order.
"""

import torch
import triton
import triton.language as tl
from torch import nn

COPY_BLOCK = 4096


@triton.jit
def _copy_caches_kernel(
    key_cache_ptr, value_cache_ptr, key_out_ptr, value_out_ptr, n_elements, BLOCK: tl.constexpr
):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    keys = tl.load(key_cache_ptr + offsets, mask=mask)
    values = tl.load(value_cache_ptr + offsets, mask=mask)
    tl.store(key_out_ptr + offsets, keys, mask=mask)
    tl.store(value_out_ptr + offsets, values, mask=mask)


@triton.jit
def _scatter_tokens_kernel(
    key_ptr,
    value_ptr,
    slot_ptr,
    key_out_ptr,
    value_out_ptr,
    tokens,
    row_size,
    key_token_stride,
    value_token_stride,
    TOKENS: tl.constexpr,
    BLOCK: tl.constexpr,
):
    token = tl.program_id(0).to(tl.int64) * TOKENS + tl.arange(0, TOKENS)
    in_range = token < tokens
    slot = tl.load(slot_ptr + token, mask=in_range, other=-1).to(tl.int64)
    cols = tl.arange(0, BLOCK)[None, :]
    mask = (in_range & (slot >= 0))[:, None] & (cols < row_size)
    keys = tl.load(key_ptr + (token * key_token_stride)[:, None] + cols, mask=mask)
    values = tl.load(value_ptr + (token * value_token_stride)[:, None] + cols, mask=mask)
    # The output caches are contiguous (NB, bs, H, D): slot s starts at s * H * D.
    out_offsets = (slot * row_size)[:, None] + cols
    tl.store(key_out_ptr + out_offsets, keys.to(key_out_ptr.dtype.element_ty), mask=mask)
    tl.store(value_out_ptr + out_offsets, values.to(value_out_ptr.dtype.element_ty), mask=mask)


class Model(nn.Module):
    def forward(
        self,
        key: torch.Tensor,
        value: torch.Tensor,
        key_cache: torch.Tensor,
        value_cache: torch.Tensor,
        slot_mapping: torch.Tensor,
    ) -> dict[str, torch.Tensor]:
        key_cache_in = key_cache.contiguous()
        value_cache_in = value_cache.contiguous()
        key_out = torch.empty(key_cache_in.shape, dtype=key_cache.dtype, device=key.device)
        value_out = torch.empty(value_cache_in.shape, dtype=value_cache.dtype, device=key.device)
        n_elements = key_out.numel()
        if n_elements > 0:
            _copy_caches_kernel[(triton.cdiv(n_elements, COPY_BLOCK),)](
                key_cache_in,
                value_cache_in,
                key_out,
                value_out,
                n_elements,
                BLOCK=COPY_BLOCK,
                num_warps=8,
            )
        tokens, heads, head_size = key.shape
        row_size = heads * head_size
        if tokens > 0 and row_size > 0:
            # Each token's (H, D) block is one contiguous row of H * D elements.
            key_rows = key.reshape(tokens, row_size)
            value_rows = value.reshape(tokens, row_size)
            block = triton.next_power_of_2(row_size)
            tokens_per_program = max(1, 4096 // block)
            _scatter_tokens_kernel[(triton.cdiv(tokens, tokens_per_program),)](
                key_rows,
                value_rows,
                slot_mapping,
                key_out,
                value_out,
                tokens,
                row_size,
                key_rows.stride(0),
                value_rows.stride(0),
                TOKENS=tokens_per_program,
                BLOCK=block,
                num_warps=min(max(tokens_per_program * block // 512, 1), 16),
            )
        return {"key_cache": key_out, "value_cache": value_out}
