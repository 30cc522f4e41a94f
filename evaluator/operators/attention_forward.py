"""``attention_forward`` (atrex_001): packed variable-length self-attention, non-causal, bf16.

Per sequence i (query rows cu_seqlens_q[i] … cu_seqlens_q[i+1]−1, key rows
cu_seqlens_k[i] … cu_seqlens_k[i+1]−1) and head h, in fp32 on upcast inputs:
S = Q·Kᵀ/√D, P = row-softmax(S) with no mask, O = P·V, out = rnd_bf16(O).

Choices where the description is silent: rows of a sequence with an empty query range are
zeros (upstream leaves them uninitialised; no shape has one); a sequence with queries but
no keys gives zeros. Every published shape is a single sequence; several sequences are a
validation variant (docs/decisions.md 6).

Departures from upstream: none (no fp8 here). The reference loops over sequences and over
query blocks (bounded fp32 score memory, docs/decisions.md 4); this only changes fp32
summation order, not the semantics.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from evaluator.operators._attention import (
    ATTENTION_CHECKER_NOTES,
    ATTENTION_POLICY,
    attend_fp32,
    inverse_sqrt,
)
from evaluator.operators.base import OperatorSpec, Work, randn_bf16

CHECKER_NOTES = (
    ATTENTION_CHECKER_NOTES
    + """\
Not causal: a candidate that masks fails. Published shapes are single sequences; validation
variants need several sequences of different lengths (cu_seqlens) and, ideally,
cu_seqlens_k ≠ cu_seqlens_q.
"""
)


class Model(nn.Module):
    """out[rows of sequence i] = rnd_bf16(softmax(Q Kᵀ/√D) V) per head, fp32 inside, no mask."""

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        cu_seqlens_q: torch.Tensor,
        cu_seqlens_k: torch.Tensor,
    ) -> torch.Tensor:
        """Attention of each packed sequence over its own keys; returns (T, H, D) in q's dtype."""
        scale = inverse_sqrt(q.shape[-1])
        out = torch.zeros(q.shape[:-1] + v.shape[-1:], dtype=q.dtype, device=q.device)
        bounds_q = [int(b) for b in cu_seqlens_q.tolist()]
        bounds_k = [int(b) for b in cu_seqlens_k.tolist()]
        for i in range(len(bounds_q) - 1):
            q_lo, q_hi = bounds_q[i], bounds_q[i + 1]
            k_lo, k_hi = bounds_k[i], bounds_k[i + 1]
            if q_hi <= q_lo:
                continue
            out[q_lo:q_hi] = attend_fp32(
                q[q_lo:q_hi],
                k[k_lo:k_hi],
                v[k_lo:k_hi],
                scale=scale,
                causal=False,
                out_dtype=q.dtype,
            )
        return out


def make_inputs(
    *,
    device: torch.device,
    generator: torch.Generator,
    seq_lens: list[int],
    num_heads: int,
    head_dim: int,
) -> dict[str, torch.Tensor]:
    """q, k, v: N(0,1) in bf16 (T, H, D), drawn in that order; cu_seqlens_q/k: int32 prefix sums."""
    lengths = [int(length) for length in seq_lens]
    shape = (sum(lengths), int(num_heads), int(head_dim))
    q = randn_bf16(shape, device=device, generator=generator)
    k = randn_bf16(shape, device=device, generator=generator)
    v = randn_bf16(shape, device=device, generator=generator)
    bounds = [0]
    for length in lengths:
        bounds.append(bounds[-1] + length)
    cu_q = torch.tensor(bounds, dtype=torch.int32, device=device)
    cu_k = torch.tensor(bounds, dtype=torch.int32, device=device)
    return {"q": q, "k": k, "v": v, "cu_seqlens_q": cu_q, "cu_seqlens_k": cu_k}


def work(init_kwargs: Mapping[str, Any], input_kwargs: Mapping[str, Any]) -> Work:
    """W = 4·H·D·Σ L²; Q_read = 6·T·H·D + 8·(n+1); Q_write = 2·T·H·D (no causal discount)."""
    lengths = [int(length) for length in input_kwargs["seq_lens"]]
    heads, head_dim = int(input_kwargs["num_heads"]), int(input_kwargs["head_dim"])
    tokens = sum(lengths)
    return Work(
        w_flops={"bf16": 4 * heads * head_dim * sum(n * n for n in lengths)},
        q_read=6 * tokens * heads * head_dim + 8 * (len(lengths) + 1),
        q_write=2 * tokens * heads * head_dim,
    )


SPEC = OperatorSpec(
    slug="attention_forward",
    atrex_id="atrex_001",
    model_class=Model,
    input_maker=make_inputs,
    work_model=work,
    policy=ATTENTION_POLICY,
    dtype="bf16",
    phase="prefill",
)
