"""``chunk_gated_delta_rule_state`` (atrex_005): state recurrence of chunked gated delta rule.

FLA ``chunk_gated_delta_rule_fwd_h``. For each batch entry b and value head j the fp32
state Σ (K×V) starts as pool slot ``initial_state_indices[b]``, head j; for each chunk c
(length n_c; the last may be partial, no padding):

1. ``h[b, c, j] = rnd_bf16(Σ)`` — the state at the start of the chunk;
2. ``Vc = f32(u rows) − f32(w rows)·rnd_bf16(Σ)`` (fp32 accumulation; Σ is rounded to
   bf16 for this product only);
3. ``v_new rows = rnd_bf16(Vc)``;
4. γ = g at the chunk's last token; ``f_i = exp(γ − g_i)`` if ``γ − g_i <= 0``, else 0
   ("safe exp": a positive exponent zeroes the row, it is not clamped);
5. ``Ṽ = rnd_bf16(f_i · Vc[i])`` (from the unrounded Vc);
6. ``Σ ← Σ·exp(γ) + Kcᵀ·Ṽ`` (Kc the chunk's k rows of the mapped head; Σ stays fp32).

``final_state`` is a copy of the whole fp32 pool in which slot ``initial_state_indices[b]``,
head j, is replaced by the last Σ; untouched slots are bit-identical to the input. Value
head j uses k head ``min(⌊j/r⌋, Hk − 1)``, ``r = max(⌊Hv/Hk⌋, 1)``.

Departures from upstream: none.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from evaluator.operators._linear_attention import (
    heads_major_fp32,
    safe_exp,
    value_head_map,
    write_back_pool,
)
from evaluator.operators.base import BF16_POLICY, OperatorSpec, Work, randn_bf16

CHECKER_NOTES = (
    "Dict output h (bf16), v_new (bf16), final_state (fp32, the WHOLE pool). Compare every "
    "leaf with the magnitude-scaled BF16 policy; final_state is fp32 but inherits bf16 "
    "rounding noise through Ṽ, so bf16-level slack is right for its updated slots. In "
    "addition, final_state slots not named by initial_state_indices must equal the input "
    "pool bit for bit (torch.equal), since a candidate that rewrites or zeroes unused slots "
    "would otherwise hide behind the pool's large untouched share. Gates are random "
    "(non-monotone): rows with γ − g_i > 0 must contribute exactly nothing."
)


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
        batch, tokens, num_k_heads, key_dim = k.shape
        num_v_heads, value_dim = u.shape[2], u.shape[3]
        chunk = self.chunk_size
        num_chunks = math.ceil(tokens / chunk)
        head_map = value_head_map(num_v_heads, num_k_heads, device=k.device)
        k_all = heads_major_fp32(k, head_map)  # (B, Hv, T, K)
        w_all = heads_major_fp32(w)  # (B, Hv, T, K)
        u_all = heads_major_fp32(u)  # (B, Hv, T, V)
        g_all = g.float().permute(0, 2, 1)  # (B, Hv, T)
        slots = initial_state_indices.long()
        state = initial_state.index_select(0, slots).float()  # (B, Hv, K, V), a copy
        h = torch.empty(
            (batch, num_chunks, num_v_heads, key_dim, value_dim),
            dtype=torch.bfloat16,
            device=k.device,
        )
        v_new = torch.empty_like(u)
        for index in range(num_chunks):
            start, stop = index * chunk, min(tokens, (index + 1) * chunk)
            state_bf16 = state.to(torch.bfloat16)
            h[:, index] = state_bf16
            corrected = u_all[:, :, start:stop] - torch.matmul(
                w_all[:, :, start:stop], state_bf16.float()
            )
            v_new[:, start:stop] = corrected.permute(0, 2, 1, 3).to(v_new.dtype)
            g_c = g_all[:, :, start:stop]
            gamma = g_c[:, :, -1]  # (B, Hv)
            factor = safe_exp(gamma.unsqueeze(-1) - g_c)  # (B, Hv, n)
            gated = (corrected * factor.unsqueeze(-1)).to(torch.bfloat16).float()
            update = torch.matmul(k_all[:, :, start:stop].transpose(-1, -2), gated)
            state = state * torch.exp(gamma)[..., None, None] + update
        final_state = write_back_pool(initial_state, slots, state)
        return {"h": h, "v_new": v_new, "final_state": final_state}


def make_inputs(
    *,
    device: torch.device,
    generator: torch.Generator,
    batch_size: int,
    token_count: int,
    num_k_heads: int,
    num_v_heads: int,
    key_dim: int,
    value_dim: int,
    state_count: int,
) -> dict[str, torch.Tensor]:
    """k (B,T,Hk,K), w (B,T,Hv,K), u (B,T,Hv,V): 0.02·N(0,1) bf16; g (B,T,Hv): −U[0,1) fp32;
    initial_state (S,Hv,K,V): 0.02·N(0,1) fp32; initial_state_indices (B,) int32 = b mod S.

    Random tensors are drawn in the order k, w, u, g, initial_state.
    """
    draw = {"device": device, "generator": generator}
    k = randn_bf16((batch_size, token_count, num_k_heads, key_dim), **draw, scale=0.02)
    w = randn_bf16((batch_size, token_count, num_v_heads, key_dim), **draw, scale=0.02)
    u = randn_bf16((batch_size, token_count, num_v_heads, value_dim), **draw, scale=0.02)
    g = -torch.rand((batch_size, token_count, num_v_heads), dtype=torch.float32, **draw)
    initial_state = (
        torch.randn((state_count, num_v_heads, key_dim, value_dim), dtype=torch.float32, **draw)
        * 0.02
    )
    indices = (torch.arange(batch_size, device=device) % state_count).to(torch.int32)
    return {
        "k": k,
        "w": w,
        "u": u,
        "g": g,
        "initial_state": initial_state,
        "initial_state_indices": indices,
    }


def work(init_kwargs: Mapping[str, Any], input_kwargs: Mapping[str, Any]) -> Work:
    """W = Σ_c B·Hv·(4·n_c·K·V + 2·n_c·V + n_c + 2·K·V) over the actual chunk lengths n_c.

    Q_read = 2·B·T·Hk·K + 2·B·T·Hv·K + 2·B·T·Hv·V + 4·B·T·Hv + 4·B·Hv·K·V + 4·B;
    Q_write = 2·B·NC·Hv·K·V + 2·B·T·Hv·V + 4·B·Hv·K·V (only the B used pool slots count).
    """
    batch, tokens = int(input_kwargs["batch_size"]), int(input_kwargs["token_count"])
    num_k, num_v = int(input_kwargs["num_k_heads"]), int(input_kwargs["num_v_heads"])
    key_dim, value_dim = int(input_kwargs["key_dim"]), int(input_kwargs["value_dim"])
    chunk = int(init_kwargs.get("chunk_size", 64))
    num_chunks = math.ceil(tokens / chunk)
    state_elems = key_dim * value_dim
    # Σ_c n_c = T, and there are NC chunks, so the sum over chunks collapses.
    flops = (
        batch
        * num_v
        * (
            4 * tokens * state_elems
            + 2 * tokens * value_dim
            + tokens
            + 2 * num_chunks * state_elems
        )
    )
    q_read = (
        2 * batch * tokens * num_k * key_dim
        + 2 * batch * tokens * num_v * key_dim
        + 2 * batch * tokens * num_v * value_dim
        + 4 * batch * tokens * num_v
        + 4 * batch * num_v * state_elems
        + 4 * batch
    )
    q_write = (
        2 * batch * num_chunks * num_v * state_elems
        + 2 * batch * tokens * num_v * value_dim
        + 4 * batch * num_v * state_elems
    )
    return Work(w_flops={"bf16": flops}, q_read=q_read, q_write=q_write)


SPEC = OperatorSpec(
    slug="chunk_gated_delta_rule_state",
    atrex_id="atrex_005",
    model_class=Model,
    input_maker=make_inputs,
    work_model=work,
    policy=BF16_POLICY,
    dtype="bf16",
    phase="prefill",
    output_names=("h", "v_new", "final_state"),
)
