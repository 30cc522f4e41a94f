"""Shared pieces of the linear-attention (gated delta rule) references.

``chunk_delta_rule_output``, ``chunk_gated_delta_rule_state`` and ``gated_delta_rule_update``
share three rules of OPERATORS.md Part C:

* the grouped head map: value head ``j`` reads query/key head ``min(⌊j/r⌋, Hqk − 1)`` with
  ``r = max(⌊Hv/Hqk⌋, 1)`` (consecutive grouping; also defined when Hqk does not divide Hv);
* the "safe exp" of the chunked kernels: ``exp(d)`` where ``d <= 0`` and exactly 0 where the
  exponent is positive (masked, not clamped);
* the state pool: ``final_state`` is a copy of the whole fp32 pool in which only the slots
  named by ``initial_state_indices`` are replaced, so untouched slots stay bit-identical.
"""

from __future__ import annotations

import torch


def value_head_map(num_v_heads: int, num_qk_heads: int, *, device: torch.device) -> torch.Tensor:
    """Index of the query/key head read by each value head: min(⌊j/r⌋, Hqk−1), r=max(⌊Hv/Hqk⌋,1)."""
    ratio = max(num_v_heads // num_qk_heads, 1)
    heads = torch.arange(num_v_heads, device=device, dtype=torch.long) // ratio
    return heads.clamp(max=num_qk_heads - 1)


def heads_major_fp32(x: torch.Tensor, head_map: torch.Tensor | None = None) -> torch.Tensor:
    """(B, T, H, D) -> fp32 (B, Hv, T, D), optionally gathering heads through ``head_map``."""
    xf = x.float()
    if head_map is not None:
        xf = xf.index_select(2, head_map)
    return xf.permute(0, 2, 1, 3).contiguous()


def safe_exp(exponent: torch.Tensor) -> torch.Tensor:
    """exp(d) where d <= 0, else exactly 0 (a positive exponent zeroes the entry)."""
    return torch.where(exponent <= 0, torch.exp(exponent), torch.zeros_like(exponent))


def write_back_pool(
    pool: torch.Tensor, indices: torch.Tensor, states: torch.Tensor
) -> torch.Tensor:
    """A copy of ``pool`` with slot ``indices[b]`` replaced by ``states[b]`` for every b.

    Written in batch order, so if two batch entries named the same slot the later one would
    win (the published inputs use distinct slots, b mod S).
    """
    result = pool.clone()
    for batch_index, slot in enumerate(indices.tolist()):
        result[int(slot)] = states[batch_index].to(result.dtype)
    return result
