"""torch.compile baseline for ``mla_decode_attention`` (the reference's arithmetic).

On CUDA the forward runs through ``torch.compile`` (inductor); on CPU it runs eagerly (see
the bundle's README). A baseline, not a submission: the harness counts inductor kernels and
PyTorch ops as fallback.
"""

from __future__ import annotations

import functools

import torch
from _attention import attend_fp32, inverse_sqrt
from torch import nn


class Reference(nn.Module):
    """out[b, h] = rnd_bf16(softmax_l(q[b,h]·c_l/√Dq) · c[:, :r]) over sequence b's rows."""

    def __init__(self, nhead: int, kv_lora_rank: int, qk_rope_head_dim: int) -> None:
        super().__init__()
        self.nhead = nhead
        self.kv_lora_rank = kv_lora_rank
        self.qk_rope_head_dim = qk_rope_head_dim

    def forward(
        self, q: torch.Tensor, kv_cache: torch.Tensor, seq_lens: torch.Tensor
    ) -> torch.Tensor:
        """(B, nh, r) in q's dtype."""
        rank = self.kv_lora_rank
        scale = inverse_sqrt(q.shape[-1])
        out = torch.zeros((q.shape[0], q.shape[1], rank), dtype=q.dtype, device=q.device)
        offset = 0
        for b, length in enumerate(int(n) for n in seq_lens.tolist()):
            rows = kv_cache[offset : offset + max(length, 0)]  # (L, 1, Dq)
            offset += max(length, 0)
            out[b : b + 1] = attend_fp32(
                q[b : b + 1], rows, rows[..., :rank], scale=scale, causal=False, out_dtype=q.dtype
            )
        return out


@functools.cache
def _compiled_forward():
    return torch.compile(Reference.forward)


class Model(Reference):
    def forward(
        self, q: torch.Tensor, kv_cache: torch.Tensor, seq_lens: torch.Tensor
    ) -> torch.Tensor:
        if q.is_cuda:
            return _compiled_forward()(self, q, kv_cache, seq_lens)
        return super().forward(q, kv_cache, seq_lens)
