"""Registry of the built-in operators (``get_operator(slug)``, ``OPERATORS``).

Importing this package imports torch (the reference models are torch modules); the
web side uses ``evaluator.suite`` for operator metadata instead.
"""

from __future__ import annotations

from evaluator.errors import UnknownOperatorError
from evaluator.operators import fused_add_rms_norm, rms_norm, silu_and_mul
from evaluator.operators.base import CorrectnessPolicy, OperatorSpec, Work

OPERATORS: dict[str, OperatorSpec] = {
    spec.slug: spec for spec in (fused_add_rms_norm.SPEC, rms_norm.SPEC, silu_and_mul.SPEC)
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
