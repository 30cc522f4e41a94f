"""The eager baselines (evaluator/baselines/): each stands in for its operator's reference
and passes the operator's own correctness check (the one a submission gets) on the smoke
shapes, on a real v1 shape small enough for the CPU, and on the operator's hidden
validation variants; a baseline that is off fails that check."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
import torch

from evaluator.baselines import BASELINES, get_baseline
from evaluator.correctness import check_shape, clone_inputs
from evaluator.errors import UnknownOperatorError
from evaluator.operators import get_operator
from evaluator.operators._variants import variants_for
from evaluator.suite import load_suite
from evaluator.variants import check_variant

SUITE = load_suite("atrex-bench-v1")
CPU = torch.device("cpu")
RUN_SEED = 20261202
# The real (published) shape checked on the CPU: per operator, the cheapest whose bytes
# moved and FLOPs stay under the small limits, or, for an operator with none, its cheapest
# under the large ones (every v1 operator has one; those are marked slow: up to a minute or
# two on a loaded 2-core host, mostly the fp8 MoE input generator quantising its experts).
# One shape an operator: a second cheapest added 27 s of CPU (18.5 s of it one delta-rule
# shape) and no kind of check. Every shape is checked on the GPU, where
# bench/reference_baseline.py --mode baseline checks each baseline against its reference
# before timing it.
SMALL_SHAPE = (40_000_000, 2_000_000_000)
LARGE_SHAPE = (160_000_000, 4_000_000_000)
# Small shapes whose check still takes seconds on the CPU (the reference's per-sequence
# loop): marked slow too, so that `make test-fast` stays quick. 6.8 s on this 2-core
# machine (`make test-fast PYTEST_ARGS=--durations=40`, 2026-12-04).
SLOW_ON_CPU = {"chunk_gated_delta_rule_state"}


def _cost(shape) -> tuple[int, int, str]:
    return (shape.q_read + shape.q_write, sum(shape.w_flops.values()), shape.shape_id)


def _real_shapes() -> list[tuple[str, object, bool]]:
    """(operator, shape, large) for the real shape checked, one an operator."""
    chosen = []
    for operator in SUITE.operator_slugs():
        shapes = sorted(SUITE.shapes_for(operator, "full"), key=_cost)
        for max_bytes, max_flops in (SMALL_SHAPE, LARGE_SHAPE):
            fit = [s for s in shapes if _cost(s)[0] <= max_bytes and _cost(s)[1] <= max_flops]
            if fit:
                chosen.append((operator, fit[0], max_bytes == LARGE_SHAPE[0]))
                break
    return chosen


REAL_SHAPES = _real_shapes()


def _check(operator: str, shape, *, trials: int | None = None, candidate=None, spec=None):
    spec = spec or get_operator(operator)
    baseline = candidate or get_baseline(operator)(**shape.init_kwargs)
    return check_shape(
        spec=spec,
        reference=spec.build_reference(shape.init_kwargs),
        candidate=baseline,
        shape_id=shape.shape_id,
        input_kwargs=shape.input_kwargs,
        device=CPU,
        run_seed=RUN_SEED,
        trials=trials,
    )


def test_every_operator_of_the_suite_has_a_baseline_and_nothing_else_does():
    assert sorted(BASELINES) == sorted(SUITE.operator_slugs())
    with pytest.raises(UnknownOperatorError, match="no_such_operator"):
        get_baseline("no_such_operator")


@pytest.mark.parametrize("operator", SUITE.operator_slugs())
def test_baseline_has_the_references_interface(operator):
    reference, baseline = get_operator(operator).model_class, get_baseline(operator)
    assert baseline is not reference
    for method in ("__init__", "forward"):
        expected = inspect.signature(getattr(reference, method)).parameters
        got = inspect.signature(getattr(baseline, method)).parameters
        assert list(got) == list(expected), f"{operator}.{method}"
        for name, parameter in expected.items():
            assert got[name].default == parameter.default, f"{operator}.{method}({name})"


@pytest.mark.parametrize("operator", SUITE.operator_slugs())
def test_baseline_passes_the_operators_check_on_every_smoke_shape(operator):
    for shape in SUITE.shapes_for(operator, "smoke"):
        result = _check(operator, shape, spec=_drawn_once(get_operator(operator)))
        assert result.ok, f"{operator}/{shape.shape_id}: {result.error}"
        assert result.trials == get_operator(operator).policy.trials


@pytest.mark.parametrize(
    ("operator", "shape"),
    [
        pytest.param(
            op,
            shape,
            id=f"{op}-{shape.shape_id}",
            marks=[pytest.mark.slow] * (large or op in SLOW_ON_CPU),
        )
        for op, shape, large in REAL_SHAPES
    ],
)
def test_baseline_passes_the_operators_check_on_a_real_shape(operator, shape):
    result = _check(operator, shape, trials=1, spec=_drawn_once(get_operator(operator)))
    assert result.ok, f"{operator}/{shape.shape_id}: {result.error}"


def _drawn_once(spec):
    """``spec`` whose input generator runs once per seed: check_shape draws a trial's inputs
    twice from one seed (the candidate's, then the reference's after the call), the same
    values both times; on the fp8 MoE shapes the draw is most of the test's time (its
    generator block-quantises the experts on the CPU). The second draw is a copy taken
    before the candidate ran, so a candidate that wrote to its inputs is still caught."""
    copies: dict[tuple, dict] = {}
    draw = spec.input_maker

    def input_maker(*, device, generator, **input_kwargs):
        key = (generator.initial_seed(), repr(sorted(input_kwargs.items())))
        if key in copies:
            return copies.pop(key)
        inputs = draw(device=device, generator=generator, **input_kwargs)
        copies[key] = clone_inputs(inputs)
        return inputs

    return dataclasses.replace(spec, input_maker=input_maker)


def test_every_operator_is_checked_at_a_real_shape():
    assert {operator for operator, _, _ in REAL_SHAPES} == set(SUITE.operator_slugs())


@pytest.mark.parametrize("operator", [op for op in SUITE.operator_slugs() if variants_for(op)])
def test_baseline_passes_the_operators_validation_variants(operator):
    for variant in variants_for(operator):
        record = check_variant(
            spec=get_operator(operator),
            variant=variant,
            model_class=get_baseline(operator),
            device=CPU,
            run_seed=RUN_SEED,
        )
        assert record["status"] == "pass", record


class _ScaledBy:
    """A baseline whose every floating output is 1.02 times the true one."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def __call__(self, **inputs):
        output = self.inner(**inputs)
        if isinstance(output, dict):
            return {key: value * 1.02 for key, value in output.items()}
        if isinstance(output, tuple):
            return tuple(value * 1.02 for value in output)
        return output * 1.02


@pytest.mark.parametrize("operator", ["rms_norm", "chunk_delta_rule_output", "attention_forward"])
def test_a_baseline_that_is_off_by_two_percent_fails_the_check(operator):
    shape = SUITE.shapes_for(operator, "smoke")[0]
    inner = get_baseline(operator)(**shape.init_kwargs)
    result = _check(operator, shape, candidate=_ScaledBy(inner))
    assert not result.ok and result.error
