"""Registry of the eager baselines (``get_baseline(slug)``, ``BASELINES``).

An operator's *baseline* is the PyTorch a practitioner writes for it: library calls where
they exist, tensor operations batched over tokens, the same ``Model(**init_kwargs)`` /
``forward(**inputs)`` interface and output structure as the operator's reference, so that
it can stand in for it. The references (``evaluator/operators/``) stay the correctness
oracle: accuracy first, bounded memory, explicit fp32 arithmetic. A baseline is checked
against its reference by the operator's own correctness policy (the check a submission
gets; ``tests/evaluator/test_baselines.py``) and is what ``bench/reference_baseline.py
--mode baseline`` times: the board's eager row and the denominator of "speedup over eager"
(docs/baselines.md).

One module per operator, each defining ``Model`` and, in its docstring, what it does
differently from the reference and why it still passes the reference's check. Importing
this package imports torch.
"""

from __future__ import annotations

import importlib

from torch import nn

from evaluator.errors import UnknownOperatorError
from evaluator.operators import OPERATOR_MODULES

# One module per operator of the suite, named as the operator's own module.
BASELINE_MODULES = OPERATOR_MODULES

BASELINES: dict[str, type[nn.Module]] = {
    name: importlib.import_module(f"evaluator.baselines.{name}").Model for name in BASELINE_MODULES
}


def get_baseline(slug: str) -> type[nn.Module]:
    """The baseline ``Model`` class of the operator ``slug``; UnknownOperatorError otherwise."""
    try:
        return BASELINES[slug]
    except KeyError:
        known = ", ".join(sorted(BASELINES))
        raise UnknownOperatorError(
            f"No eager baseline for an operator named {slug!r}; baselines exist for: {known}."
        ) from None


__all__ = ["BASELINES", "BASELINE_MODULES", "get_baseline"]
