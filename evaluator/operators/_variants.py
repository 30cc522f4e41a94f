"""The hidden validation variants of the built-in operators (docs/decisions.md 6).

Each variant is a small correctness point at inputs the published shapes leave out: rotary
at non-zero positions, several packed sequences, shuffled block tables and slot mappings,
monotone gates, a state pool slot other than 0. ``evaluator.variants`` checks them.

They live here, not in the operator modules, because an agent is shown its operator's
module as the reference source (``agents.loop.reference_source``) and agents never see
the variants; for the same reason the operator modules do not name them.

Sizes stay small: the variants run in every evaluation that is not public, on the CPU in
the Triton interpreter too. Each keeps a published configuration (the init kwargs, head
sizes and dtypes of published shapes) and changes only what the published inputs leave
out, so a kernel specialised to the published configurations is still judged fairly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from evaluator.operators.base import randn_bf16

InputAdjuster = Callable[[dict[str, torch.Tensor], torch.Generator], dict[str, torch.Tensor]]
"""Rewrites inputs drawn by an operator's ``make_inputs`` (same generator, drawn after them)."""


@dataclass(frozen=True)
class ValidationVariant:
    """A hidden correctness point of an operator: checked, never timed, never scored.

    Its inputs are the operator's ``make_inputs`` at ``input_kwargs``, then rewritten by
    ``adjust`` when given; its reference is ``Model(**init_kwargs)``. ``name`` is what a
    failing candidate is told.
    """

    name: str
    init_kwargs: Mapping[str, Any]
    input_kwargs: Mapping[str, Any]
    adjust: InputAdjuster | None = None


def _permuted_blocks(
    cache: torch.Tensor, moved_to: torch.Tensor
) -> torch.Tensor:  # block i moves to moved_to[i]
    shuffled = torch.empty_like(cache)
    shuffled[moved_to] = cache
    return shuffled


# --------------------------------------------------------------------------- rotary

MAX_POSITION = 4096
MROPE_BASE = 1_000_000.0


def scattered_positions(
    inputs: dict[str, torch.Tensor], generator: torch.Generator
) -> dict[str, torch.Tensor]:
    """fused_qkv_rope: distinct positions in [1, 4096), in no order (published: position 0,
    where rotary is the identity)."""
    positions = inputs["positions"]
    drawn = torch.randperm(MAX_POSITION - 1, generator=generator, device=positions.device)
    return {**inputs, "positions": (drawn[: positions.shape[0]] + 1).to(torch.int32)}


def position_angles(
    inputs: dict[str, torch.Tensor], generator: torch.Generator
) -> dict[str, torch.Tensor]:
    """mrope: cos/sin tables of real M-RoPE angles, θ[a, t, f] = p[a, t]·10⁶^(−f/half), the
    (temporal, height, width) positions of each token drawn apart in [0, 4096).

    The published tables hold small angles (0.1·N(0,1): cos ≈ 1, the three axes nearly
    alike), where e.g. a kernel that derives cos from sin as √(1 − sin²) stays within
    tolerance.
    """
    cos = inputs["cos"]
    axes, tokens, half = cos.shape
    positions = torch.randint(
        0, MAX_POSITION, (axes, tokens), generator=generator, device=cos.device
    )
    exponents = torch.arange(half, dtype=torch.float64, device=cos.device) / half
    angles = (positions.double().unsqueeze(-1) * MROPE_BASE**-exponents).float()
    return {**inputs, "cos": torch.cos(angles), "sin": torch.sin(angles)}


_ROPE_HEADS = {"num_heads": 4, "num_kv_heads": 2, "head_dim": 128}
# Published: D = d = 128, no bias, bf16 and fp16. The bias is in the interface but in no
# published shape, so no variant requires one.
FUSED_QKV_ROPE = tuple(
    ValidationVariant(
        name=f"rotary at non-zero positions ({dtype})",
        init_kwargs={**_ROPE_HEADS, "rope_dim": 128},
        input_kwargs={**_ROPE_HEADS, "total_tokens": 6, "dtype": dtype},
        adjust=scattered_positions,
    )
    for dtype in ("bf16", "fp16")
)

# Published: NeoX, not interleaved, sections 16/24/24 of 128. The interleaved and GPT-J
# styles are in the interface but in no published shape, so no variant judges them.
MROPE = (
    ValidationVariant(
        name="rotary angles of distinct (t, h, w) positions",
        init_kwargs={
            "head_size": 128,
            "rotary_dim": 128,
            "mrope_section": [16, 24, 24],
            "mrope_interleaved": False,
            "is_neox_style": True,
        },
        input_kwargs={
            "token_count": 6,
            "num_query_heads": 4,
            "num_kv_heads": 2,
            "head_size": 128,
            "rotary_dim": 128,
        },
        adjust=position_angles,
    ),
)

# --------------------------------------------------------------------------- attention

# Every published shape is a single sequence; both published head sizes.
ATTENTION_FORWARD = (
    ValidationVariant(
        name="several sequences (lengths 5, 1, 19, 33)",
        init_kwargs={},
        input_kwargs={"seq_lens": [5, 1, 19, 33], "num_heads": 2, "head_dim": 128},
    ),
    ValidationVariant(
        name="several sequences (lengths 40, 3, 16)",
        init_kwargs={},
        input_kwargs={"seq_lens": [40, 3, 16], "num_heads": 4, "head_dim": 72},
    ),
)


def paged_shuffled_blocks(
    inputs: dict[str, torch.Tensor], generator: torch.Generator
) -> dict[str, torch.Tensor]:
    """paged_attention_decode: physical blocks permuted (the spare ones included; the table
    remapped alike) and each sequence's length drawn in [1, ctx_len] (published: sequential
    tables, one length for all)."""
    k_cache = inputs["k_cache"]
    device = k_cache.device
    moved_to = torch.randperm(k_cache.shape[0], generator=generator, device=device)
    seq_lens = inputs["seq_lens"]
    lengths = torch.randint(
        1, int(seq_lens.max()) + 1, seq_lens.shape, generator=generator, device=device
    )
    return {
        **inputs,
        "k_cache": _permuted_blocks(k_cache, moved_to),
        "v_cache": _permuted_blocks(inputs["v_cache"], moved_to),
        "block_tables": moved_to[inputs["block_tables"].long()].to(torch.int32),
        "seq_lens": lengths.to(torch.int32),
    }


_PAGED_SIZES = {
    "num_seqs": 3,
    "ctx_len": 40,
    "num_query_heads": 4,
    "num_kv_heads": 2,
    "head_size": 128,
    "block_size": 16,
}
PAGED_ATTENTION_DECODE = tuple(
    ValidationVariant(
        name=f"shuffled block tables, varied lengths ({dtype})",
        init_kwargs={},
        input_kwargs={**_PAGED_SIZES, "dtype": dtype},
        adjust=paged_shuffled_blocks,
    )
    for dtype in ("bf16", "fp16")
)


def unified_shuffled_blocks(
    inputs: dict[str, torch.Tensor], generator: torch.Generator
) -> dict[str, torch.Tensor]:
    """unified_attention: physical blocks permuted (the 64 spare ones included) and
    block_table remapped alike, padding entries (never read) too; the answer is unchanged.
    n_s = L_s stays: n_s ≠ L_s would test the reference's no-mask quirk, not vLLM."""
    k_cache = inputs["k_cache"]
    moved_to = torch.randperm(k_cache.shape[0], generator=generator, device=k_cache.device)
    return {
        **inputs,
        "k_cache": _permuted_blocks(k_cache, moved_to),
        "v_cache": _permuted_blocks(inputs["v_cache"], moved_to),
        "block_table": moved_to[inputs["block_table"].long()].to(torch.int32),
    }


UNIFIED_ATTENTION = tuple(
    ValidationVariant(
        name=f"shuffled block table (head size {head_size})",
        init_kwargs={},
        input_kwargs={
            "num_seqs": 3,
            "seq_lens": [1, 17, 40],
            "num_query_heads": 4,
            "num_kv_heads": 2,
            "head_size": head_size,
            "block_size": 16,
        },
        adjust=unified_shuffled_blocks,
    )
    for head_size in (128, 72)
)

SPARE_CACHE_BLOCKS = 2


def scattered_slots(
    inputs: dict[str, torch.Tensor], generator: torch.Generator
) -> dict[str, torch.Tensor]:
    """reshape_and_cache: caches with two spare blocks, filled with earlier values (which
    must survive), and a shuffled slot mapping over all their slots in which every fourth
    token is padding (−1, skipped). Published: slots 0 … T−1 into zero caches."""
    key = inputs["key"]
    blocks, block_size, heads, dim = inputs["key_cache"].shape
    cache_shape = (blocks + SPARE_CACHE_BLOCKS, block_size, heads, dim)
    draw = {"device": key.device, "generator": generator}
    key_cache = randn_bf16(cache_shape, **draw)
    value_cache = randn_bf16(cache_shape, **draw)
    slots = torch.randperm(cache_shape[0] * block_size, **draw)[: key.shape[0]]
    slots = slots.to(torch.int64)
    slots[::4] = -1
    return {
        **inputs,
        "key_cache": key_cache,
        "value_cache": value_cache,
        "slot_mapping": slots,
    }


RESHAPE_AND_CACHE = (
    ValidationVariant(
        name="shuffled slot mapping with padding slots, filled caches",
        init_kwargs={},
        input_kwargs={"shape": [37, 2, 128], "block_size": 16},
        adjust=scattered_slots,
    ),
)

# --------------------------------------------------------------------------- delta rule

GATE_STEP = 0.05
"""Largest per-token log-decay of the monotone gates: a 64-token chunk then decays by about
e^-1.6, so the state and the intra-chunk terms both stay visible."""


def monotone_gates(chunk_size: int) -> InputAdjuster:
    """An adjuster replacing ``g`` (B, T, Hv) by chunk-local cumulative sums of −0.05·U[0,1)
    steps, as FLA feeds its chunked kernels: g falls within every chunk. The published gates
    are random, so about half the causal pairs are masked by the safe exp; here none is."""

    def adjust(
        inputs: dict[str, torch.Tensor], generator: torch.Generator
    ) -> dict[str, torch.Tensor]:
        gates = inputs["g"]
        batch, tokens, heads = gates.shape
        chunks = -(-tokens // chunk_size)
        steps = -GATE_STEP * torch.rand(
            (batch, chunks * chunk_size, heads),
            dtype=torch.float32,
            device=gates.device,
            generator=generator,
        )
        cumulative = steps.view(batch, chunks, chunk_size, heads).cumsum(dim=2)
        return {**inputs, "g": cumulative.view(batch, chunks * chunk_size, heads)[:, :tokens]}

    return adjust


def other_state_slots(
    inputs: dict[str, torch.Tensor], generator: torch.Generator
) -> dict[str, torch.Tensor]:
    """``initial_state_indices`` replaced by distinct pool slots other than 0, in no order
    (published: b mod S with B = 1, always slot 0)."""
    pool, indices = inputs["initial_state"], inputs["initial_state_indices"]
    slots = torch.randperm(pool.shape[0] - 1, generator=generator, device=pool.device) + 1
    return {**inputs, "initial_state_indices": slots[: indices.numel()].to(torch.int32)}


# T = 100 leaves a partial last chunk of the published chunk size 64.
CHUNK_DELTA_RULE_OUTPUT = (
    ValidationVariant(
        name="monotone (chunk-cumulative) gates",
        init_kwargs={"chunk_size": 64},
        input_kwargs={
            "batch_size": 1,
            "token_count": 100,
            "num_q_heads": 2,
            "num_v_heads": 4,
            "key_dim": 128,
            "value_dim": 128,
            "chunk_size": 64,
        },
        adjust=monotone_gates(64),
    ),
)

_CHUNK_STATE_SIZES = {
    "batch_size": 1,
    "token_count": 100,
    "num_k_heads": 2,
    "num_v_heads": 4,
    "key_dim": 128,
    "value_dim": 128,
    "state_count": 5,
}
CHUNK_GATED_DELTA_RULE_STATE = (
    ValidationVariant(
        name="monotone (chunk-cumulative) gates",
        init_kwargs={"chunk_size": 64},
        input_kwargs=_CHUNK_STATE_SIZES,
        adjust=monotone_gates(64),
    ),
    ValidationVariant(
        name="state in a pool slot other than 0",
        init_kwargs={"chunk_size": 64},
        input_kwargs=_CHUNK_STATE_SIZES,
        adjust=other_state_slots,
    ),
)

# gated_delta_rule_update computes its decay exp(g) itself from A_log, a and dt_bias
# (g <= 0 for any input): there are no free gates to make monotone. Its published shapes
# (B = 1) all start from pool slot 0.
GATED_DELTA_RULE_UPDATE = (
    ValidationVariant(
        name="state in a pool slot other than 0",
        init_kwargs={"softplus_beta": 1.0, "softplus_threshold": 20.0, "use_qk_l2norm": True},
        input_kwargs={
            "batch_size": 1,
            "token_count": 3,
            "num_q_heads": 2,
            "num_v_heads": 4,
            "key_dim": 128,
            "value_dim": 128,
            "state_count": 4,
        },
        adjust=other_state_slots,
    ),
)

VARIANTS: dict[str, tuple[ValidationVariant, ...]] = {
    "fused_qkv_rope": FUSED_QKV_ROPE,
    "mrope": MROPE,
    "attention_forward": ATTENTION_FORWARD,
    "paged_attention_decode": PAGED_ATTENTION_DECODE,
    "unified_attention": UNIFIED_ATTENTION,
    "reshape_and_cache": RESHAPE_AND_CACHE,
    "chunk_delta_rule_output": CHUNK_DELTA_RULE_OUTPUT,
    "chunk_gated_delta_rule_state": CHUNK_GATED_DELTA_RULE_STATE,
    "gated_delta_rule_update": GATED_DELTA_RULE_UPDATE,
}
"""Operators not listed have none: their published shapes leave nothing of this kind out
(or, for the fp8 and MoE operators, no such gap is known yet)."""


def variants_for(slug: str) -> tuple[ValidationVariant, ...]:
    """The validation variants of a built-in operator (empty for the others)."""
    return VARIANTS.get(slug, ())
