"""``gated_delta_rule_update`` (atrex_013): recurrent gated delta rule with sigmoid gating.

Token-by-token Gated DeltaNet decode (SGLang ``fused_sigmoid_gating_delta_rule_update``).
All fp32. Per (b, t, j): ``z = f32(a) + f32(dt_bias[j])``; ``softplus(z) = z`` if
``β·z > threshold`` else ``log(1 + exp(β·z))/β``; ``g = −exp(A_log[j])·softplus(z)``;
``β_t = sigmoid(f32(b[b, t, j]))``. Per batch entry b and value head j, starting from pool
slot ``initial_state_indices[b]``, head j (K×V), for t = 0 … T−1 in order:

1. ``q̂ = q/max(‖q‖₂, 1e-6)``, ``k̂`` likewise (if ``use_qk_l2norm``), on the mapped head;
2. ``Σ ← Σ·exp(g)``;
3. ``p = Σᵀ k̂``;
4. ``δ = (f32(v_t) − p)·β_t``;
5. ``Σ ← Σ + k̂ δᵀ``;
6. ``out[b, t, j] = rnd_bf16(Σᵀ (q̂·scale))`` with the updated Σ (scale default K^−1/2).

``final_state`` is a copy of the whole pool with slot ``initial_state_indices[b]``, head j,
replaced by the last Σ. Value head j uses q/k head ``min(⌊j/r⌋, Hq − 1)``,
``r = max(⌊Hv/Hq⌋, 1)``. The token loop is sequential by nature; each step is a handful
of tensor operations batched over batch entries and heads.

Departures from upstream: none.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from evaluator.operators._linear_attention import value_head_map, write_back_pool
from evaluator.operators.base import BF16_POLICY, OperatorSpec, Work, randn_bf16

CHECKER_NOTES = (
    "Dict output out (bf16, tiny: |out| <= ~0.004, so upstream's atol 1e-2 passes zeros) and "
    "final_state (fp32, the WHOLE pool). Compare both with the magnitude-scaled BF16 "
    "policy (final_state is the meaningful check of the recurrence). final_state slots not "
    "named by initial_state_indices must equal the input pool bit for bit (torch.equal)."
)


def _l2_normalise(x: torch.Tensor) -> torch.Tensor:
    """x / max(‖x‖₂, 1e-6) over the last axis, fp32."""
    return x / torch.linalg.vector_norm(x, dim=-1, keepdim=True).clamp_min(1e-6)


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


def make_inputs(
    *,
    device: torch.device,
    generator: torch.Generator,
    batch_size: int,
    token_count: int,
    num_q_heads: int,
    num_v_heads: int,
    key_dim: int,
    value_dim: int,
    state_count: int,
) -> dict[str, torch.Tensor]:
    """Draws, in this order: A_log (Hv,) 0.02·N fp32; a (B,T,Hv) 0.02·N bf16; dt_bias (Hv,)
    0.02·N bf16; q (B,T,Hq,K) 0.02·N bf16; k (B,T,Hq,K) N bf16; v (B,T,Hv,V) 0.02·N bf16;
    b (B,T,Hv) N bf16; initial_state (S,Hv,K,V) 0.02·N fp32. initial_state_indices (B,)
    int32 = b mod S.
    """
    draw = {"device": device, "generator": generator}
    A_log = torch.randn((num_v_heads,), dtype=torch.float32, **draw) * 0.02
    a = randn_bf16((batch_size, token_count, num_v_heads), **draw, scale=0.02)
    dt_bias = randn_bf16((num_v_heads,), **draw, scale=0.02)
    q = randn_bf16((batch_size, token_count, num_q_heads, key_dim), **draw, scale=0.02)
    k = randn_bf16((batch_size, token_count, num_q_heads, key_dim), **draw)
    v = randn_bf16((batch_size, token_count, num_v_heads, value_dim), **draw, scale=0.02)
    b = randn_bf16((batch_size, token_count, num_v_heads), **draw)
    initial_state = (
        torch.randn((state_count, num_v_heads, key_dim, value_dim), dtype=torch.float32, **draw)
        * 0.02
    )
    indices = (torch.arange(batch_size, device=device) % state_count).to(torch.int32)
    return {
        "A_log": A_log,
        "a": a,
        "dt_bias": dt_bias,
        "q": q,
        "k": k,
        "v": v,
        "b": b,
        "initial_state": initial_state,
        "initial_state_indices": indices,
    }


def work(init_kwargs: Mapping[str, Any], input_kwargs: Mapping[str, Any]) -> Work:
    """W = B·T·Hv·(7·K·V + 3·K) + 2·B·T·Hv; Q counts the whole S-slot pool (read and write).

    Q_read = 6·Hv + 4·B·T·Hv + 4·B·T·Hq·K + 2·B·T·Hv·V + 4·S·Hv·K·V + 4·B;
    Q_write = 2·B·T·Hv·V + 4·S·Hv·K·V.
    """
    batch, tokens = int(input_kwargs["batch_size"]), int(input_kwargs["token_count"])
    num_qk, num_v = int(input_kwargs["num_q_heads"]), int(input_kwargs["num_v_heads"])
    key_dim, value_dim = int(input_kwargs["key_dim"]), int(input_kwargs["value_dim"])
    pool = int(input_kwargs["state_count"]) * num_v * key_dim * value_dim
    flops = (
        batch * tokens * num_v * (7 * key_dim * value_dim + 3 * key_dim)
        + 2 * batch * tokens * num_v
    )
    q_read = (
        6 * num_v
        + 4 * batch * tokens * num_v
        + 4 * batch * tokens * num_qk * key_dim
        + 2 * batch * tokens * num_v * value_dim
        + 4 * pool
        + 4 * batch
    )
    q_write = 2 * batch * tokens * num_v * value_dim + 4 * pool
    return Work(w_flops={"bf16": flops}, q_read=q_read, q_write=q_write)


SPEC = OperatorSpec(
    slug="gated_delta_rule_update",
    atrex_id="atrex_013",
    model_class=Model,
    input_maker=make_inputs,
    work_model=work,
    policy=BF16_POLICY,
    dtype="bf16",
    phase="decode",
    output_names=("out", "final_state"),
)
