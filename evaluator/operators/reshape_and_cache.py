"""``reshape_and_cache`` (atrex_026): scatter new keys/values into a flash-layout paged cache.

Outputs are copies of ``key_cache`` and ``value_cache`` (NB, bs, H, D) in which, for each
token t with slot σ = slot_mapping[t] ≥ 0, cache[⌊σ/bs⌋, σ mod bs] is set to that token's
(H, D) key (resp. value); negative slots are skipped; no dtype conversion. The full caches
are returned, untouched slots included. With duplicate slots the winner is unspecified
(never happens in the generated inputs; the reference's ``index_copy_`` leaves it to the
backend).

Departures from upstream: none (no fp8 here).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from evaluator.operators.base import CorrectnessPolicy, OperatorSpec, Work, randn_bf16

CHECKER_NOTES = """\
A pure copy: both caches must equal the reference bit for bit (EXACT_POLICY: rtol 0, atol 0),
including the untouched zero slots of the last block. Writing into the input caches in
place is allowed upstream, but the returned tensors must not alias inputs on this portal,
and inputs must stay unmodified: a candidate must clone. slot_mapping is int64 and unique;
validation variants should use a non-identity (shuffled, partly negative) slot mapping.
"""

# A copy must be exact; the generic bf16 tolerance would let a lossy copy pass.
EXACT_POLICY = CorrectnessPolicy(rtol=0.0, atol_scale=0.0, atol_floor=0.0)


class Model(nn.Module):
    """key_cache/value_cache copies with row slot_mapping[t] set to token t's key/value."""

    def forward(
        self,
        key: torch.Tensor,
        value: torch.Tensor,
        key_cache: torch.Tensor,
        value_cache: torch.Tensor,
        slot_mapping: torch.Tensor,
    ) -> dict[str, torch.Tensor]:
        """Dict with the updated full caches ``key_cache`` and ``value_cache``."""
        valid = slot_mapping >= 0
        slots = slot_mapping[valid].long()
        outputs = {}
        for name, cache, new in (
            ("key_cache", key_cache, key),
            ("value_cache", value_cache, value),
        ):
            updated = cache.clone(memory_format=torch.contiguous_format)
            flat = updated.view(-1, *cache.shape[2:])  # (NB·bs, H, D), shares storage
            flat.index_copy_(0, slots, new[valid].to(cache.dtype))
            outputs[name] = updated
        return outputs


def make_inputs(
    *, device: torch.device, generator: torch.Generator, shape: list[int], block_size: int = 16
) -> dict[str, torch.Tensor]:
    """key then value: N(0,1) bf16 (T, H, D); zero caches (ceil(T/bs), bs, H, D);
    slot_mapping = 0 … T−1 (int64)."""
    tokens, heads, dim = (int(d) for d in shape)
    bs = int(block_size)
    num_blocks = -(-tokens // bs)
    key = randn_bf16((tokens, heads, dim), device=device, generator=generator)
    value = randn_bf16((tokens, heads, dim), device=device, generator=generator)
    cache_shape = (num_blocks, bs, heads, dim)
    return {
        "key": key,
        "value": value,
        "key_cache": torch.zeros(cache_shape, dtype=torch.bfloat16, device=device),
        "value_cache": torch.zeros(cache_shape, dtype=torch.bfloat16, device=device),
        "slot_mapping": torch.arange(tokens, dtype=torch.int64, device=device),
    }


def work(init_kwargs: Mapping[str, Any], input_kwargs: Mapping[str, Any]) -> Work:
    """W = 0; Q_read = 4·T·H·D + 4·NB·bs·H·D + 8·T; Q_write = 4·NB·bs·H·D (whole caches)."""
    tokens, heads, dim = (int(d) for d in input_kwargs["shape"])
    bs = int(input_kwargs.get("block_size", 16))
    cache_elems = -(-tokens // bs) * bs * heads * dim
    return Work(
        w_flops={"bf16": 0},
        q_read=4 * tokens * heads * dim + 4 * cache_elems + 8 * tokens,
        q_write=4 * cache_elems,
    )


SPEC = OperatorSpec(
    slug="reshape_and_cache",
    atrex_id="atrex_026",
    model_class=Model,
    input_maker=make_inputs,
    work_model=work,
    policy=EXACT_POLICY,
    dtype="bf16",
    phase="prefill/decode",
    output_names=("key_cache", "value_cache"),
)
