"""Scatter new keys/values into copies of a paged (flash-layout) cache, in Triton.

Two launches: one copies both whole caches into the new outputs (flat, vectorised
blocks), then one writes each token's (H, D) key and value into its slot
(slot_mapping[t]; negative slots are skipped). Both run on the same stream, in order.
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
    heads,
    head_size,
    key_token_stride,
    key_head_stride,
    value_token_stride,
    value_head_stride,
    BLOCK_HEADS: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    token = tl.program_id(0).to(tl.int64)
    slot = tl.load(slot_ptr + token).to(tl.int64)
    if slot >= 0:
        head_index = tl.arange(0, BLOCK_HEADS)
        dims = tl.arange(0, BLOCK_D)
        mask = (head_index < heads)[:, None] & (dims < head_size)[None, :]
        key_offsets = token * key_token_stride + head_index[:, None] * key_head_stride
        value_offsets = token * value_token_stride + head_index[:, None] * value_head_stride
        keys = tl.load(key_ptr + key_offsets + dims[None, :], mask=mask)
        values = tl.load(value_ptr + value_offsets + dims[None, :], mask=mask)
        # The output caches are contiguous (NB, bs, H, D): slot s starts at s * H * D.
        out_offsets = slot * heads * head_size + head_index[:, None] * head_size + dims[None, :]
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
        if tokens > 0 and heads * head_size > 0:
            block_heads = triton.next_power_of_2(heads)
            block_d = triton.next_power_of_2(head_size)
            if key.stride(-1) != 1:
                key = key.contiguous()
            if value.stride(-1) != 1:
                value = value.contiguous()
            _scatter_tokens_kernel[(tokens,)](
                key,
                value,
                slot_mapping,
                key_out,
                value_out,
                heads,
                head_size,
                key.stride(0),
                key.stride(1),
                value.stride(0),
                value.stride(1),
                BLOCK_HEADS=block_heads,
                BLOCK_D=block_d,
                num_warps=min(max(block_heads * block_d // 512, 1), 8),
            )
        return {"key_cache": key_out, "value_cache": value_out}
