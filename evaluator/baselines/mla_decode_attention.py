"""``mla_decode_attention`` baseline: one batched ``F.scaled_dot_product_attention`` over the
shared latent stream (all query heads on one KV head), values the first r dims of the keys.

Differs from the reference: with equal lengths (every published shape) the packed cache is
viewed as (B, 1, L, Dq) and all sequences and heads go through one SDPA call on the bf16
tensors (``enable_gqa``: nh query heads share the single latent head), instead of a loop
over sequences with explicit fp32 scores. Unequal lengths fall back to one call per
sequence. Still correct: scale 1/sqrt(r + rp) (SDPA's default for the full Dq), values =
c[:, :r], fp32 inside and one rounding; a sequence with L_b = 0 gives zeros.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional


class Model(nn.Module):
    """out[b, h] = SDPA(q[b, h], c_b, c_b[:, :r]) over sequence b's rows."""

    def __init__(self, nhead: int, kv_lora_rank: int, qk_rope_head_dim: int) -> None:
        super().__init__()
        self.nhead = nhead
        self.kv_lora_rank = kv_lora_rank
        self.qk_rope_head_dim = qk_rope_head_dim

    def _attend(self, q: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """q (B, nh, Dq), rows (B, L, Dq) -> (B, nh, r)."""
        latent = rows.unsqueeze(1)  # (B, 1, L, Dq)
        return functional.scaled_dot_product_attention(
            q.unsqueeze(2), latent, latent[..., : self.kv_lora_rank], enable_gqa=True
        ).squeeze(2)

    def forward(
        self, q: torch.Tensor, kv_cache: torch.Tensor, seq_lens: torch.Tensor
    ) -> torch.Tensor:
        batch, dim = q.shape[0], q.shape[-1]
        lengths = seq_lens.tolist()
        if lengths and min(lengths) > 0 and min(lengths) == max(lengths):
            return self._attend(q, kv_cache.view(batch, lengths[0], dim))
        out = torch.zeros((batch, q.shape[1], self.kv_lora_rank), dtype=q.dtype, device=q.device)
        offset = 0
        for b, length in enumerate(lengths):
            length = max(length, 0)
            if length:
                rows = kv_cache[offset : offset + length].view(1, length, dim)
                out[b : b + 1] = self._attend(q[b : b + 1], rows)
            offset += length
        return out
