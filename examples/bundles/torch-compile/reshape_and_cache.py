"""torch.compile baseline for ``reshape_and_cache`` (the reference's arithmetic).

On CUDA the forward runs through ``torch.compile`` (inductor); on CPU it runs eagerly (see
the bundle's README). A baseline, not a submission: the harness counts inductor kernels and
PyTorch ops as fallback.
"""

from __future__ import annotations

import functools

import torch
from torch import nn


class Reference(nn.Module):
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


@functools.cache
def _compiled_forward():
    return torch.compile(Reference.forward)


class Model(Reference):
    def forward(
        self,
        key: torch.Tensor,
        value: torch.Tensor,
        key_cache: torch.Tensor,
        value_cache: torch.Tensor,
        slot_mapping: torch.Tensor,
    ) -> dict[str, torch.Tensor]:
        if key.is_cuda:
            return _compiled_forward()(self, key, value, key_cache, value_cache, slot_mapping)
        return super().forward(key, value, key_cache, value_cache, slot_mapping)
