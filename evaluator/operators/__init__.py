"""Registry of the built-in operators (``get_operator(slug)``, ``OPERATORS``).

Importing this package imports torch (the reference models are torch modules); the
web side uses ``evaluator.suite`` for operator metadata instead.
"""

from __future__ import annotations

import importlib

from evaluator.errors import UnknownOperatorError
from evaluator.operators.base import CorrectnessPolicy, OperatorSpec, Work

# One module per operator, each defining SPEC.
OPERATOR_MODULES = (
    "attention_forward",
    "block_scaled_mm",
    "causal_conv1d",
    "chunk_delta_rule_output",
    "chunk_gated_delta_rule_state",
    "fp8_blockscale_fused_moe",
    "fp8_dynamic_per_token_quant",
    "fused_add_rms_norm",
    "fused_moe",
    "fused_qk_rmsnorm",
    "fused_qkv_rope",
    "fused_rmsnorm_quant",
    "gated_delta_rule_update",
    "gated_rms_norm",
    "l2_norm",
    "layer_norm",
    "linear_sigmoid_mul",
    "mla_decode_attention",
    "moe_align_block_size",
    "moe_count_and_sort",
    "moe_sum_reduce",
    "moe_topk_gating_softmax",
    "mrope",
    "paged_attention_decode",
    "per_token_group_quant_fp8",
    "reshape_and_cache",
    "rms_norm",
    "silu_and_mul",
    "topk_filter",
    "unified_attention",
)
OPERATORS: dict[str, OperatorSpec] = {
    spec.slug: spec
    for spec in (
        importlib.import_module(f"evaluator.operators.{name}").SPEC for name in OPERATOR_MODULES
    )
}


def get_operator(slug: str) -> OperatorSpec:
    """The built-in operator named ``slug``; raises UnknownOperatorError otherwise."""
    try:
        return OPERATORS[slug]
    except KeyError:
        known = ", ".join(sorted(OPERATORS))
        raise UnknownOperatorError(
            f"No built-in operator named {slug!r}; this evaluator implements: {known}."
        ) from None


__all__ = ["OPERATORS", "CorrectnessPolicy", "OperatorSpec", "Work", "get_operator"]
