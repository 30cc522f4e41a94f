"""``reshape_and_cache`` baseline: clone the caches, write the tokens' rows with
``index_copy_`` on the (NB*bs, H, D) views.

Differs from the reference: nothing of substance (the reference is the torch-native
implementation serving engines use); the valid slots are selected once for both caches
and each cache is cloned contiguous and written through a view. Still correct: a pure
copy, bit for bit; negative slots are skipped; the returned caches do not alias the inputs.
"""

from __future__ import annotations

import torch
from torch import nn


class Model(nn.Module):
    """Copies of key_cache/value_cache with row slot_mapping[t] set to token t's key/value."""

    def forward(
        self,
        key: torch.Tensor,
        value: torch.Tensor,
        key_cache: torch.Tensor,
        value_cache: torch.Tensor,
        slot_mapping: torch.Tensor,
    ) -> dict[str, torch.Tensor]:
        valid = slot_mapping >= 0
        slots = slot_mapping[valid]
        key_out = key_cache.clone(memory_format=torch.contiguous_format)
        value_out = value_cache.clone(memory_format=torch.contiguous_format)
        key_out.view(-1, *key_out.shape[2:]).index_copy_(0, slots, key[valid])
        value_out.view(-1, *value_out.shape[2:]).index_copy_(0, slots, value[valid])
        return {"key_cache": key_out, "value_cache": value_out}
