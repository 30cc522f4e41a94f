"""``chunk_gated_delta_rule_state`` baseline: the chunk recurrence with everything that does
not depend on the state computed for all chunks up front.

Differs from the reference: T is padded to whole chunks and viewed as (B, Hv, NC, cs, .),
so the gate factors exp(gamma - g_i), exp(gamma) and the head-mapped keys of every chunk are
computed in one batched pass; the loop over chunks (the state recurrence is sequential by
nature) then does two batched matmuls and a few in-place updates per chunk, and the pool
write-back is one ``index_copy_``. Still correct: padded rows have zero k, w, u, and
f_i = 0 for them is never needed (their corrected values multiply zero keys), gamma is
taken at each chunk's last real token; the same fp32 arithmetic with the same bf16
rounding points (the state for h and for w.S, the gated values); untouched pool slots are
copied bit for bit.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional


class Model(nn.Module):
    """Walks the chunks: start states ``h``, corrected values ``v_new``, final pool."""

    def __init__(self, chunk_size: int = 64) -> None:
        super().__init__()
        self.chunk_size = int(chunk_size)

    def forward(
        self,
        k: torch.Tensor,
        w: torch.Tensor,
        u: torch.Tensor,
        g: torch.Tensor,
        initial_state: torch.Tensor,
        initial_state_indices: torch.Tensor,
    ) -> dict[str, torch.Tensor]:
        batch, tokens, k_heads, key_dim = k.shape
        v_heads, value_dim = u.shape[2], u.shape[3]
        cs = self.chunk_size
        chunks = math.ceil(tokens / cs)
        pad = chunks * cs - tokens
        ratio = max(v_heads // k_heads, 1)
        head_map = (torch.arange(v_heads, device=k.device) // ratio).clamp(max=k_heads - 1)

        def chunked(x: torch.Tensor) -> torch.Tensor:  # (B, T, H, D) -> (B, NC, H, cs, D) fp32
            x = functional.pad(x.float(), (0, 0, 0, 0, 0, pad))
            return x.view(batch, chunks, cs, x.shape[2], x.shape[3]).transpose(2, 3)

        k_c = chunked(k.index_select(2, head_map)).transpose(-1, -2)  # (B, NC, Hv, K, cs)
        w_c, u_c = chunked(w), chunked(u)
        g_c = functional.pad(g.float(), (0, 0, 0, pad)).view(batch, chunks, cs, v_heads)
        g_c = g_c.transpose(2, 3)  # (B, NC, Hv, cs)
        last = torch.full((chunks,), cs - 1, device=k.device)
        last[-1] = tokens - 1 - (chunks - 1) * cs
        gamma = g_c.gather(3, last.view(1, chunks, 1, 1).expand(batch, chunks, v_heads, 1))
        exponent = gamma - g_c
        factor = torch.where(exponent <= 0, exponent.exp(), 0.0).unsqueeze(-1)
        decay = gamma.exp().unsqueeze(-1)  # (B, NC, Hv, 1, 1)

        slots = initial_state_indices.long()
        state = initial_state[slots].float()  # (B, Hv, K, V)
        h = torch.empty(
            (batch, chunks, v_heads, key_dim, value_dim), dtype=torch.bfloat16, device=k.device
        )
        v_new = torch.empty(
            (batch, chunks, v_heads, cs, value_dim), dtype=torch.float32, device=k.device
        )
        for c in range(chunks):
            h[:, c] = state
            corrected = torch.sub(
                u_c[:, c], torch.matmul(w_c[:, c], h[:, c].float()), out=v_new[:, c]
            )
            gated = (corrected * factor[:, c]).to(torch.bfloat16).float()
            state.mul_(decay[:, c]).add_(torch.matmul(k_c[:, c], gated))
        v_new = v_new.transpose(2, 3).reshape(batch, chunks * cs, v_heads, value_dim)
        final_state = initial_state.clone().index_copy_(0, slots, state)
        return {"h": h, "v_new": v_new[:, :tokens].to(u.dtype), "final_state": final_state}
