"""``gated_delta_rule_update`` baseline: gates by ``F.softplus`` and ``torch.sigmoid`` for all
tokens at once, q and k normalised by ``F.normalize``, then the token recurrence with
in-place state updates.

Differs from the reference: library calls for the softplus (with beta and threshold) and
the L2 normalisation, the per-token steps as batched ``matmul``s and in-place
``mul_``/``add_`` on one state tensor, the pool write-back as one ``index_copy_``. The loop
over tokens remains: the recurrence is sequential by nature (each token reads the state the
previous one wrote). Still correct: ``F.softplus(z, beta, threshold)`` is z above the
threshold and log(1 + exp(beta z)) / beta below it; ``F.normalize(eps=1e-6)`` is
x / max(||x||, 1e-6); the same fp32 steps in the same order per token; untouched pool slots
are copied bit for bit.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional


class Model(nn.Module):
    """Sequential gated delta rule over tokens; returns ``out`` and the whole state pool."""

    def __init__(
        self,
        softplus_beta: float = 1.0,
        softplus_threshold: float = 20.0,
        scale: float | None = None,
        use_qk_l2norm: bool = True,
    ) -> None:
        super().__init__()
        self.softplus_beta = float(softplus_beta)
        self.softplus_threshold = float(softplus_threshold)
        self.scale = scale
        self.use_qk_l2norm = bool(use_qk_l2norm)

    def forward(
        self,
        A_log: torch.Tensor,
        a: torch.Tensor,
        dt_bias: torch.Tensor,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        b: torch.Tensor,
        initial_state: torch.Tensor,
        initial_state_indices: torch.Tensor,
    ) -> dict[str, torch.Tensor]:
        tokens, qk_heads, key_dim = q.shape[1], q.shape[2], q.shape[3]
        v_heads = v.shape[2]
        scale = key_dim**-0.5 if self.scale is None else float(self.scale)
        ratio = max(v_heads // qk_heads, 1)
        head_map = (torch.arange(v_heads, device=q.device) // ratio).clamp(max=qk_heads - 1)
        q_all = q.float().index_select(2, head_map)  # (B, T, Hv, K)
        k_all = k.float().index_select(2, head_map)
        if self.use_qk_l2norm:
            q_all = functional.normalize(q_all, dim=-1, eps=1e-6)
            k_all = functional.normalize(k_all, dim=-1, eps=1e-6)
        q_all = q_all * scale
        soft = functional.softplus(
            a.float() + dt_bias.float(), beta=self.softplus_beta, threshold=self.softplus_threshold
        )
        decay = torch.exp(-torch.exp(A_log.float()) * soft)[..., None, None]  # (B, T, Hv, 1, 1)
        write_gate = torch.sigmoid(b.float()).unsqueeze(-1)  # (B, T, Hv, 1)
        v_all = v.float()
        slots = initial_state_indices.long()
        state = initial_state[slots].float()  # (B, Hv, K, V)
        out = torch.empty(v.shape, dtype=torch.float32, device=v.device)
        for t in range(tokens):
            k_t = k_all[:, t].unsqueeze(-1)  # (B, Hv, K, 1)
            state.mul_(decay[:, t])
            predicted = torch.matmul(k_t.transpose(-1, -2), state).squeeze(-2)  # (B, Hv, V)
            delta = (v_all[:, t] - predicted) * write_gate[:, t]
            state.add_(k_t * delta.unsqueeze(-2))
            out[:, t] = torch.matmul(q_all[:, t].unsqueeze(-2), state).squeeze(-2)
        final_state = initial_state.clone().index_copy_(0, slots, state)
        return {"out": out.to(v.dtype), "final_state": final_state}
