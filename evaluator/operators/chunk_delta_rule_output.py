"""``chunk_delta_rule_output`` (atrex_004): output stage of chunked gated delta-rule attention.

FLA ``chunk_fwd_o``. For each batch entry b, value head j and chunk c (tokens
``c·cs … min(T, (c+1)·cs) − 1``; the last chunk may be partial), in fp32 from upcast
inputs, with Q, Kc the chunk's q/k rows of the mapped head, Vc its v rows, G its gates and
Hc = f32(h[b, c, j]) (K×V):

1. ``inter[i] = (Q[i]·Hc) · exp(G[i])``;
2. ``A[i, l] = (Q[i]·Kc[l]) · exp(G[i] − G[l])`` if ``l <= i`` and ``G[i] − G[l] <= 0``,
   else 0 ("safe exp": a positive exponent zeroes the entry, it is not clamped);
3. ``Ab = rnd_bf16(A)`` (used as fp32);
4. ``out[i] = rnd_bf16((inter[i] + Σ_l Ab[i, l]·Vc[l]) · scale)``.

The scale (default K^−1/2) multiplies both terms at the end; q is not pre-scaled. Value
head j reads q/k head ``min(⌊j/r⌋, Hq − 1)``, ``r = max(⌊Hv/Hq⌋, 1)``. Upstream pads T to
a multiple of cs with zeros, which cannot affect real rows; this reference works on the
actual chunk lengths instead.

Departures from upstream: none.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from evaluator.operators._linear_attention import heads_major_fp32, safe_exp, value_head_map
from evaluator.operators.base import BF16_POLICY, OperatorSpec, Work, randn_bf16

CHECKER_NOTES = (
    "Outputs are tiny (|out| <= ~0.01): upstream's fixed atol 1e-2 passes an all-zero answer; "
    "compare with the magnitude-scaled BF16 policy. Because A is rounded to bf16 before A·V, "
    "a different fp32 summation order for q·k can flip one A rounding and move an output by "
    "about one bf16 step; upstream measured at most 0.2 % of elements one ulp off."
)


class Model(nn.Module):
    """Inter-chunk term from each chunk's start state plus a gated causal intra-chunk term."""

    def __init__(self, chunk_size: int = 64, scale: float | None = None) -> None:
        super().__init__()
        self.chunk_size = int(chunk_size)
        self.scale = scale

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, h: torch.Tensor, g: torch.Tensor
    ) -> torch.Tensor:
        batch, tokens, num_qk_heads, key_dim = q.shape
        num_v_heads = v.shape[2]
        chunk = self.chunk_size
        num_chunks = math.ceil(tokens / chunk)
        if h.shape[1] != num_chunks:
            raise ValueError(
                f"h has {h.shape[1]} chunk states; T={tokens} with chunk_size "
                f"{chunk} needs {num_chunks}"
            )
        scale = key_dim**-0.5 if self.scale is None else float(self.scale)
        head_map = value_head_map(num_v_heads, num_qk_heads, device=q.device)
        q_all = heads_major_fp32(q, head_map)  # (B, Hv, T, K)
        k_all = heads_major_fp32(k, head_map)  # (B, Hv, T, K)
        v_all = heads_major_fp32(v)  # (B, Hv, T, V)
        g_all = g.float().permute(0, 2, 1)  # (B, Hv, T)
        out = torch.empty_like(v)
        for index in range(num_chunks):
            start, stop = index * chunk, min(tokens, (index + 1) * chunk)
            q_c, k_c = q_all[:, :, start:stop], k_all[:, :, start:stop]
            v_c, g_c = v_all[:, :, start:stop], g_all[:, :, start:stop]
            h_c = h[:, index].float()  # (B, Hv, K, V)
            inter = torch.matmul(q_c, h_c) * torch.exp(g_c).unsqueeze(-1)
            exponent = g_c.unsqueeze(-1) - g_c.unsqueeze(-2)  # G[i] - G[l]
            length = stop - start
            causal = torch.ones(length, length, dtype=torch.bool, device=q.device).tril()
            keep = causal & (exponent <= 0)
            scores = torch.matmul(q_c, k_c.transpose(-1, -2)) * safe_exp(exponent)
            attn = torch.where(keep, scores, torch.zeros_like(scores))
            attn = attn.to(torch.bfloat16).float()
            o = (inter + torch.matmul(attn, v_c)) * scale
            out[:, start:stop] = o.permute(0, 2, 1, 3).to(out.dtype)
        return out


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
    chunk_size: int = 64,
) -> dict[str, torch.Tensor]:
    """q, k (B,T,Hq,K), v (B,T,Hv,V), h (B,NC,Hv,K,V) bf16; g (B,T,Hv) fp32 = −U[0,1).

    q, v, h are 0.02·N(0,1) and k is N(0,1) (not scaled); drawn in the order q, k, v, h, g.
    """
    num_chunks = math.ceil(token_count / chunk_size)
    draw = {"device": device, "generator": generator}
    q = randn_bf16((batch_size, token_count, num_q_heads, key_dim), **draw, scale=0.02)
    k = randn_bf16((batch_size, token_count, num_q_heads, key_dim), **draw)
    v = randn_bf16((batch_size, token_count, num_v_heads, value_dim), **draw, scale=0.02)
    h = randn_bf16((batch_size, num_chunks, num_v_heads, key_dim, value_dim), **draw, scale=0.02)
    g = -torch.rand((batch_size, token_count, num_v_heads), dtype=torch.float32, **draw)
    return {"q": q, "k": k, "v": v, "h": h, "g": g}


def work(init_kwargs: Mapping[str, Any], input_kwargs: Mapping[str, Any]) -> Work:
    """W = B·Hv·NC·(2·cs·K·V + 2·cs²·K + 2·cs²·V + 3·cs·V + 2·cs²) (partial chunk counted full).

    Q_read = 4·B·T·Hq·K + 2·B·T·Hv·V + 2·B·NC·Hv·K·V + 4·B·T·Hv; Q_write = 2·B·T·Hv·V.
    """
    batch, tokens = int(input_kwargs["batch_size"]), int(input_kwargs["token_count"])
    num_qk, num_v = int(input_kwargs["num_q_heads"]), int(input_kwargs["num_v_heads"])
    key_dim, value_dim = int(input_kwargs["key_dim"]), int(input_kwargs["value_dim"])
    chunk = int(input_kwargs.get("chunk_size", init_kwargs.get("chunk_size", 64)))
    num_chunks = math.ceil(tokens / chunk)
    per_chunk = (
        2 * chunk * key_dim * value_dim
        + 2 * chunk * chunk * key_dim
        + 2 * chunk * chunk * value_dim
        + 3 * chunk * value_dim
        + 2 * chunk * chunk
    )
    q_read = (
        4 * batch * tokens * num_qk * key_dim
        + 2 * batch * tokens * num_v * value_dim
        + 2 * batch * num_chunks * num_v * key_dim * value_dim
        + 4 * batch * tokens * num_v
    )
    return Work(
        w_flops={"bf16": batch * num_v * num_chunks * per_chunk},
        q_read=q_read,
        q_write=2 * batch * tokens * num_v * value_dim,
    )


SPEC = OperatorSpec(
    slug="chunk_delta_rule_output",
    atrex_id="atrex_004",
    model_class=Model,
    input_maker=make_inputs,
    work_model=work,
    policy=BF16_POLICY,
    dtype="bf16",
    phase="prefill",
)
