"""The family each operator belongs to (attention, MoE, norms, quantisation, …), written
once: the board groups its operator columns by it and its compact view shows one column
per family. Pure Python (no models), so any page or export may import it.

The families follow the evaluator's shared operator code (``evaluator/operators/_attention``,
``_linear_attention``, ``_moe_gemm``, ``_norms_quant``) and what each operator does in the
inference step. An operator not listed here (one an admin uploaded in the upstream format)
falls into a family by its slug, else into "Other".
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OperatorGroup:
    slug: str
    label: str
    operators: tuple[str, ...]


GROUPS: tuple[OperatorGroup, ...] = (
    OperatorGroup(
        "attention",
        "Attention",
        (
            "unified_attention",
            "paged_attention_decode",
            "mla_decode_attention",
            "attention_forward",
        ),
    ),
    OperatorGroup(
        "kv-cache-rope", "KV cache & rotary", ("reshape_and_cache", "fused_qkv_rope", "mrope")
    ),
    OperatorGroup(
        "linear-attention",
        "Linear attention & SSM",
        (
            "gated_delta_rule_update",
            "causal_conv1d",
            "chunk_gated_delta_rule_state",
            "chunk_delta_rule_output",
        ),
    ),
    OperatorGroup(
        "moe",
        "MoE",
        (
            "fused_moe",
            "fp8_blockscale_fused_moe",
            "moe_topk_gating_softmax",
            "moe_align_block_size",
            "moe_count_and_sort",
            "moe_sum_reduce",
        ),
    ),
    OperatorGroup("gemm", "GEMM", ("block_scaled_mm", "linear_sigmoid_mul")),
    OperatorGroup(
        "norms",
        "Norms",
        (
            "rms_norm",
            "fused_add_rms_norm",
            "fused_qk_rmsnorm",
            "gated_rms_norm",
            "l2_norm",
            "layer_norm",
        ),
    ),
    OperatorGroup(
        "quantisation",
        "Quantisation",
        ("fp8_dynamic_per_token_quant", "per_token_group_quant_fp8", "fused_rmsnorm_quant"),
    ),
    OperatorGroup("activation-sampling", "Activation & sampling", ("silu_and_mul", "topk_filter")),
)
OTHER = OperatorGroup("other", "Other", ())

_BY_OPERATOR = {slug: group for group in GROUPS for slug in group.operators}
_BY_SLUG = {group.slug: group for group in (*GROUPS, OTHER)}
# For operators not listed: the first rule whose word is in the slug.
_SLUG_RULES = (
    ("quant", "quantisation"),
    ("moe", "moe"),
    ("attention", "attention"),
    ("attn", "attention"),
    ("norm", "norms"),
    ("rope", "kv-cache-rope"),
    ("cache", "kv-cache-rope"),
    ("delta_rule", "linear-attention"),
    ("conv", "linear-attention"),
    ("mm", "gemm"),
    ("gemm", "gemm"),
)


def operator_group(slug: str) -> OperatorGroup:
    """The family of operator ``slug`` (``OTHER`` when nothing fits)."""
    listed = _BY_OPERATOR.get(slug)
    if listed is not None:
        return listed
    for word, group_slug in _SLUG_RULES:
        if word in slug:
            return _BY_SLUG[group_slug]
    return OTHER
