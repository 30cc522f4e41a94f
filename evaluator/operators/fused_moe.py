"""``fused_moe`` (atrex_009): bf16 MoE expert FFN (SiLU-GLU), router weights applied, fp32 out.

x = f32(hidden_states). Duplicate slots of a token merge first: omega[t, e] = sum over the
token's slots s (in slot order) of topk_weights[t, s] * [topk_ids[t, s] = e]. Then for each
expert e = 0 .. E-1 in increasing order, for the tokens with omega[t, e] != 0 (experts
without tokens are skipped): z = x . f32(w1[e])^T (true fp32 GEMM, TF32 off);
a = silu(z[:, :I]) * z[:, I:]; y = a . f32(w2[e])^T; out[t] += y * omega[t, e] (fp32,
accumulated expert by expert). Returns out (T, H) fp32, not cast back to bf16. Memory:
one expert's fp32 weights and its tokens' activations at a time.

Departures from upstream: none. The fp32 GEMMs are computed with TF32 off explicitly
(``torch.set_float32_matmul_precision("highest")`` while the reference runs), which is
PyTorch's default and what upstream measured.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn
from torch.nn import functional

from evaluator.operators._moe_gemm import strict_fp32_matmul, uniform_topk_ids
from evaluator.operators.base import BF16_POLICY, OperatorSpec, Work, randn_bf16

CHECKER_NOTES = """\
Output: one tensor `out`, (T, H) fp32 (not bf16). Outputs are small (|out| <~ 0.02), so the
comparison must be relative (BF16_POLICY: atol = 1e-3 * max|ref|, rtol 2**-6 on |ref|). A
kernel with bf16 operands for the second GEMM (the intermediate rounded to bf16) deviates by
~1e-3 relative and passes; duplicated experts of one token may be processed as separate
slots (the same FFN on the same input) or merged: only the accumulation order differs."""

# Published draws behind the stored W/Q (OPERATORS.md C.9), used by the test to check the
# formula: pairs P and distinct experts U per shape id.
PUBLISHED_PAIRS = (
    246,
    524,
    1264,
    1924,
    3724,
    7871,
    14389,
    29596,
    8,
    18651,
    32637,
    63793,
    123047,
    199534,
    357673,
    4054,
    7947,
    15916,
    30658,
    63732,
    7699,
    15324,
    28841,
)

# The published W/Q of each shape come from one random draw (P pairs, U experts used). For
# the published shapes' kwargs (T, H, I, E, k) the work model uses that recorded draw, so it
# reproduces the published figures exactly; for any other shape it uses the expectation
# (which misses the draw of id 0 by +2.9% in W and of id 8 by -2.7%).
_SHAPE_KEYS = (
    [(t, 2048, 2048, 8, 2) for t in (135, 277, 668, 1023, 1979, 4195, 7689, 15809)]
    + [(t, 2048, 768, 128, 8) for t in (1, 2400, 4195, 8192, 15809, 25632, 45936)]
    + [(t, 4096, 384, 128, 8) for t in (520, 1019, 2044, 3936, 8192)]
    + [(t, 4096, 4096, 8, 2) for t in (4098, 8179, 15381)]
)
RECORDED_DRAWS: dict[tuple[int, int, int, int, int], tuple[int, int]] = {
    key: (pairs, 8 if key[0] == 1 else key[3])
    for key, pairs in zip(_SHAPE_KEYS, PUBLISHED_PAIRS, strict=True)
}
WORK_EXCEPTIONS: tuple[str, ...] = ()


class Model(nn.Module):
    """Sum over experts (in order) of omega[:, e] * FFN_e(x), FFN_e(x) = silu-GLU in fp32."""

    def __init__(self, num_experts: int, intermediate_size: int, top_k: int) -> None:
        super().__init__()
        self.num_experts = num_experts
        self.intermediate_size = intermediate_size
        self.top_k = top_k  # stored, unused: the slots come from topk_ids

    def forward(
        self,
        hidden_states: torch.Tensor,
        w1: torch.Tensor,
        w2: torch.Tensor,
        topk_weights: torch.Tensor,
        topk_ids: torch.Tensor,
    ) -> torch.Tensor:
        tokens = hidden_states.shape[0]
        inter = self.intermediate_size
        x = hidden_states.float()
        weights = topk_weights.float()
        ids = topk_ids.to(torch.int64)
        # omega[t, e]: the token's slot weights for expert e, added in slot order.
        omega = torch.zeros(
            (tokens, self.num_experts), dtype=torch.float32, device=hidden_states.device
        )
        for slot in range(ids.shape[1]):
            omega.scatter_add_(1, ids[:, slot : slot + 1], weights[:, slot : slot + 1])
        out = torch.zeros_like(x)
        with strict_fp32_matmul():
            for expert in range(self.num_experts):
                token_index = torch.nonzero(omega[:, expert] != 0).squeeze(1)
                if token_index.numel() == 0:
                    continue
                z = x[token_index] @ w1[expert].float().T
                act = functional.silu(z[:, :inter]) * z[:, inter : 2 * inter]
                y = act @ w2[expert].float().T
                out.index_add_(0, token_index, y * omega[token_index, expert].unsqueeze(1))
        return out


def make_inputs(
    *,
    device: torch.device,
    generator: torch.Generator,
    token_count: int,
    hidden_size: int,
    intermediate_size: int,
    num_experts: int,
    top_k: int,
) -> dict[str, torch.Tensor]:
    """In order: hidden 0.1*N(0,1) bf16; w1 N(0,1)*H^-1/2 bf16 (E, 2I, H); w2 N(0,1)*I^-1/2
    bf16 (E, H, I); topk_weights = softmax over k of N(0,1) fp32; topk_ids uniform int32."""
    hidden_states = randn_bf16(
        (token_count, hidden_size), device=device, generator=generator, scale=0.1
    )
    w1 = randn_bf16(
        (num_experts, 2 * intermediate_size, hidden_size),
        device=device,
        generator=generator,
        scale=hidden_size**-0.5,
    )
    w2 = randn_bf16(
        (num_experts, hidden_size, intermediate_size),
        device=device,
        generator=generator,
        scale=intermediate_size**-0.5,
    )
    logits = torch.randn(
        (token_count, top_k), dtype=torch.float32, device=device, generator=generator
    )
    topk_weights = torch.softmax(logits, dim=-1)
    topk_ids = uniform_topk_ids(
        token_count=token_count,
        top_k=top_k,
        num_experts=num_experts,
        device=device,
        generator=generator,
    )
    return {
        "hidden_states": hidden_states,
        "w1": w1,
        "w2": w2,
        "topk_weights": topk_weights,
        "topk_ids": topk_ids,
    }


def expected_pairs(tokens: int, experts: int, top_k: int) -> float:
    """E[P], distinct (token, expert) pairs of k uniform draws per token: T*E*(1-(1-1/E)^k)."""
    return tokens * experts * (1.0 - (1.0 - 1.0 / experts) ** top_k)


def expected_distinct_experts(tokens: int, experts: int, top_k: int) -> float:
    """E[U], experts with at least one of the T*k uniform slots: E*(1-(1-1/E)^(T*k))."""
    return experts * (1.0 - (1.0 - 1.0 / experts) ** (tokens * top_k))


def work(
    init_kwargs: Mapping[str, Any],
    input_kwargs: Mapping[str, Any],
    *,
    pairs: float | None = None,
    distinct_experts: float | None = None,
) -> Work:
    """W = P(6HI + 5I + H) + U*T(2k - 1); Q_read = 2TH + 8Tk + 6UIH; Q_write = 4TH.

    P (distinct token-expert pairs) and U (experts used) depend on the random draw: the
    given values, else the recorded draw of a published shape, else their expectations.
    """
    tokens = int(input_kwargs["token_count"])
    hidden = int(input_kwargs["hidden_size"])
    inter = int(input_kwargs["intermediate_size"])
    experts = int(input_kwargs["num_experts"])
    top_k = int(input_kwargs["top_k"])
    recorded = RECORDED_DRAWS.get((tokens, hidden, inter, experts, top_k))
    if pairs is None:
        pairs = recorded[0] if recorded else expected_pairs(tokens, experts, top_k)
    if distinct_experts is None:
        distinct_experts = (
            recorded[1] if recorded else expected_distinct_experts(tokens, experts, top_k)
        )
    p, u = pairs, distinct_experts
    w = p * (6 * hidden * inter + 5 * inter + hidden) + u * tokens * (2 * top_k - 1)
    q_read = 2 * tokens * hidden + 8 * tokens * top_k + 6 * u * inter * hidden
    return Work(
        w_flops={"bf16": math.floor(w + 0.5)},
        q_read=math.floor(q_read + 0.5),
        q_write=4 * tokens * hidden,
    )


SPEC = OperatorSpec(
    slug="fused_moe",
    atrex_id="atrex_009",
    model_class=Model,
    input_maker=make_inputs,
    work_model=work,
    policy=BF16_POLICY,
    dtype="bf16",
    phase="prefill/decode",
)
