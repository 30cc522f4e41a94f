"""Every operator of the v1 suite is built in, and its work model reproduces the suite's
W/Q (the published figures) within 1% at every shape, except the few draw-dependent
shapes each module lists in WORK_EXCEPTIONS."""

from __future__ import annotations

import importlib

import pytest

from evaluator.operators import OPERATORS, get_operator
from evaluator.suite import load_suite

SUITE = load_suite("atrex-bench-v1")


def _close(ours: float, published: float) -> bool:
    """Within 1% of the published figure."""
    return abs(ours - published) <= 0.01 * abs(published)


def test_the_registry_holds_exactly_the_suite_operators_with_their_atrex_ids():
    assert sorted(OPERATORS) == sorted(SUITE.operator_slugs())
    for entry in SUITE.operators:
        spec = get_operator(entry.slug)
        assert spec.atrex_id == entry.atrex_id, entry.slug


@pytest.mark.parametrize("operator", SUITE.operator_slugs())
def test_work_model_reproduces_the_suite_figures(operator):
    spec = get_operator(operator)
    exceptions = set(
        getattr(importlib.import_module(f"evaluator.operators.{operator}"), "WORK_EXCEPTIONS", ())
    )
    off = []
    for shape in SUITE.shapes_for(operator):
        work = spec.work(shape.init_kwargs, shape.input_kwargs)
        same = (
            _close(work.q_read, shape.q_read)
            and _close(work.q_write, shape.q_write)
            and set(work.w_flops)
            <= set(shape.w_flops) | {k for k, v in work.w_flops.items() if v == 0}
            and all(_close(work.w_flops.get(k, 0), v) for k, v in shape.w_flops.items())
        )
        if not same:
            off.append(shape.shape_id)
    assert sorted(off) == sorted(exceptions)
