"""torch.compile baseline for ``gated_delta_rule_update`` (the reference's arithmetic).

On CUDA the forward runs through ``torch.compile`` (inductor); on CPU it runs eagerly (see
the bundle's README). A baseline, not a submission: the harness counts inductor kernels and
PyTorch ops as fallback.
"""

from __future__ import annotations

import functools

import torch
from torch import nn


def _l2_normalise(x: torch.Tensor) -> torch.Tensor:
    """x / max(‖x‖₂, 1e-6) over the last axis, fp32."""
    return x / torch.linalg.vector_norm(x, dim=-1, keepdim=True).clamp_min(1e-6)


def value_head_map(num_v_heads: int, num_qk_heads: int, *, device: torch.device) -> torch.Tensor:
    """Index of the query/key head read by each value head: min(⌊j/r⌋, Hqk−1), r=max(⌊Hv/Hqk⌋,1)."""
    ratio = max(num_v_heads // num_qk_heads, 1)
    heads = torch.arange(num_v_heads, device=device, dtype=torch.long) // ratio
    return heads.clamp(max=num_qk_heads - 1)


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


class Reference(nn.Module):
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

    def _decay_exponent(
        self, A_log: torch.Tensor, a: torch.Tensor, dt_bias: torch.Tensor
    ) -> torch.Tensor:
        """g = −exp(A_log)·softplus(f32(a) + f32(dt_bias)), shape (B, T, Hv), fp32."""
        z = a.float() + dt_bias.float()
        beta_z = self.softplus_beta * z
        soft = torch.where(
            beta_z > self.softplus_threshold,
            z,
            torch.log(1.0 + torch.exp(beta_z)) / self.softplus_beta,
        )
        return -torch.exp(A_log.float()) * soft

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
        batch, tokens, num_qk_heads, key_dim = q.shape
        num_v_heads = v.shape[2]
        scale = key_dim**-0.5 if self.scale is None else float(self.scale)
        head_map = value_head_map(num_v_heads, num_qk_heads, device=q.device)
        q_all = q.float().index_select(2, head_map)  # (B, T, Hv, K)
        k_all = k.float().index_select(2, head_map)
        if self.use_qk_l2norm:
            q_all, k_all = _l2_normalise(q_all), _l2_normalise(k_all)
        q_all = q_all * scale
        v_all = v.float()  # (B, T, Hv, V)
        decay = torch.exp(self._decay_exponent(A_log, a, dt_bias))  # (B, T, Hv)
        write_gate = torch.sigmoid(b.float())  # (B, T, Hv)
        slots = initial_state_indices.long()
        state = initial_state.index_select(0, slots).float()  # (B, Hv, K, V), a copy
        out = torch.empty(
            (batch, tokens, num_v_heads, v.shape[3]), dtype=torch.float32, device=q.device
        )
        for t in range(tokens):
            k_t = k_all[:, t]  # (B, Hv, K)
            state = state * decay[:, t, :, None, None]
            predicted = torch.einsum("bhkv,bhk->bhv", state, k_t)
            delta = (v_all[:, t] - predicted) * write_gate[:, t, :, None]
            state = state + k_t.unsqueeze(-1) * delta.unsqueeze(-2)
            out[:, t] = torch.einsum("bhkv,bhk->bhv", state, q_all[:, t])
        final_state = write_back_pool(initial_state, slots, state)
        return {"out": out.to(v.dtype), "final_state": final_state}


@functools.cache
def _compiled_forward():
    return torch.compile(Reference.forward)


class Model(Reference):
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
        if A_log.is_cuda:
            return _compiled_forward()(
                self, A_log, a, dt_bias, q, k, v, b, initial_state, initial_state_indices
            )
        return super().forward(A_log, a, dt_bias, q, k, v, b, initial_state, initial_state_indices)
