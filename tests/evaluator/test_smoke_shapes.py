"""The smoke set of the v1 suite: tiny synthetic shapes whose references run on a CPU.

Every operator's reference runs at each of its smoke shapes on the CPU in well under a
second (the per-operator time is printed; run with ``-s`` to see it), its inputs stay
under SMOKE_INPUT_LIMIT_BYTES, and its outputs have the operator's documented structure.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

import pytest
import torch

from evaluator import reference_docs
from evaluator.operators import get_operator
from evaluator.operators._variants import variants_for
from evaluator.suite import load_suite

SUITE = load_suite("atrex-bench-v1")
SMOKE_INPUT_LIMIT_BYTES = 4 * 1024 * 1024
CPU = torch.device("cpu")
# Operators whose output masks entries with -inf by design (top-k filtering of logits).
MASKED_WITH_NEG_INF = {"topk_filter"}


def _leaves(output: object, names: tuple[str, ...]) -> list[tuple[str, object]]:
    """Output leaves by documented name; AssertionError if the structure is not documented.

    A dict must have exactly the documented keys, a tuple one entry per documented name
    (names like "output[0]" or "q"), a lone tensor the single name "out".
    """
    if isinstance(output, Mapping):
        assert sorted(map(str, output)) == sorted(names)
        return [(str(key), value) for key, value in output.items()]
    if isinstance(output, tuple | list):
        assert len(output) == len(names)
        return list(zip(names, output, strict=True))
    assert names == ("out",)
    return [("out", output)]


@pytest.mark.parametrize("operator", SUITE.operator_slugs())
def test_reference_runs_on_every_smoke_shape_on_cpu(operator):
    spec = get_operator(operator)
    shapes = SUITE.shapes_for(operator, "smoke")
    assert 2 <= len(shapes) <= 3
    started = time.perf_counter()
    # What the operator page states (evaluator/operators/facts.json) is what runs here.
    seen: dict[str, dict[str, set[str]]] = {"inputs": {}, "outputs": {}}
    rules: dict[str, dict] = {}
    for seed, shape in enumerate(shapes):
        where = f"{operator}/{shape.shape_id}"
        inputs = spec.make_inputs(device=CPU, seed=seed, **shape.input_kwargs)
        for name, tensor in inputs.items():
            seen["inputs"].setdefault(name, set()).add(str(tensor.dtype).removeprefix("torch."))
        size = sum(t.numel() * t.element_size() for t in inputs.values())
        assert size < SMOKE_INPUT_LIMIT_BYTES, f"{where}: {size} bytes of inputs"
        assert shape.q_read < SMOKE_INPUT_LIMIT_BYTES, where
        output = spec.build_reference(shape.init_kwargs)(**inputs)
        leaves = _leaves(output, spec.output_names)
        assert leaves, where
        for name, tensor in leaves:
            assert type(tensor) is torch.Tensor, f"{where}: {name} is {type(tensor).__name__}"
            seen["outputs"].setdefault(name, set()).add(str(tensor.dtype).removeprefix("torch."))
            rules[name] = reference_docs.rule_facts(
                spec.policy.rule_for(name, tensor.dtype), tensor.dtype
            )
            assert tensor.device == CPU and tensor.numel() > 0, f"{where}: {name}"
            if not tensor.is_floating_point():
                continue
            values = tensor.float()
            assert not torch.isnan(values).any(), f"{where}: {name} has NaN"
            if operator in MASKED_WITH_NEG_INF:
                assert not torch.isposinf(values).any(), f"{where}: {name} has +inf"
                assert torch.isfinite(values).any(dim=-1).all(), f"{where}: a row all -inf"
            else:
                assert torch.isfinite(values).all(), f"{where}: {name} not finite"
    elapsed = time.perf_counter() - started
    print(f"\n{operator:<30} {len(shapes)} smoke shapes, reference on cpu {elapsed:.3f} s")
    stale = "evaluator/operators/facts.json is stale: python -m evaluator.reference_docs --write"
    facts = reference_docs.operator_facts(operator)
    assert facts is not None, stale
    for key in ("inputs", "outputs"):
        assert facts[key] == {name: sorted(d) for name, d in seen[key].items()}, stale
    assert facts["rules"] == rules, stale
    assert facts["trials"] == spec.policy.trials, stale
    assert facts["check_dtype"] == spec.policy.check_dtype, stale
    assert facts["validation_variants"] == bool(variants_for(operator)), stale


@pytest.mark.parametrize("operator", SUITE.operator_slugs())
def test_smoke_shapes_are_synthetic_and_carry_the_work_models_figures(operator):
    spec = get_operator(operator)
    shapes = SUITE.shapes_for(operator, "smoke")
    assert [shape.shape_id for shape in shapes] == [f"smoke-{i}" for i in range(len(shapes))]
    for shape in shapes:
        assert shape.smoke and shape.weight == 1.0 and shape.visibility == "public"
        assert shape.source == "portal (synthetic smoke shape)" and shape.description
        assert not shape.from_release
        work = spec.work(shape.init_kwargs, shape.input_kwargs)
        assert shape.w_flops == work.w_flops
        assert (shape.q_read, shape.q_write) == (work.q_read, work.q_write)
        # The published kwarg names, no more and no fewer.
        published = SUITE.shapes_for(operator, "full")
        assert any(set(shape.input_kwargs) == set(p.input_kwargs) for p in published)


def test_the_smoke_set_is_disjoint_from_the_published_full_set():
    for operator in SUITE.operator_slugs():
        full = SUITE.shapes_for(operator, "full")
        smoke = SUITE.shapes_for(operator, "smoke")
        assert all(shape.from_release and not shape.smoke for shape in full)
        assert all(shape.smoke for shape in smoke)
        assert len(full) + len(smoke) == sum(s.operator == operator for s in SUITE.shapes)
    assert sum(len(SUITE.shapes_for(op, "full")) for op in SUITE.operator_slugs()) == 440
