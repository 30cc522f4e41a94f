"""The torch.compile baseline: one file per v1 operator, each self-contained and, on CPU
(where it runs eagerly), equal to the reference on every smoke shape."""

from __future__ import annotations

import ast

import pytest

from evaluator.correctness import compare_outputs
from evaluator.operators import get_operator
from evaluator.suite import load_suite

from .conftest import TORCH_COMPILE, load_model_module, operators_of

V1_OPERATORS = load_suite("atrex-bench-v1").operator_slugs()


def test_every_v1_operator_has_a_file_that_imports_nothing_from_the_harness():
    assert operators_of(TORCH_COMPILE) == set(V1_OPERATORS)
    for path in TORCH_COMPILE.glob("*.py"):
        tree = ast.parse(path.read_text())
        imported = {
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.Import)
            for alias in node.names
        } | {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert not any(str(name).startswith("evaluator") for name in imported), path.name
        if path.stem in V1_OPERATORS:  # the helper modules beside them compile nothing
            assert "torch.compile(Reference.forward)" in path.read_text(), path.name


@pytest.mark.parametrize("operator", V1_OPERATORS)
def test_model_equals_the_reference_on_the_smoke_shapes(suite_v1, operator):
    spec = get_operator(operator)
    module = load_model_module(TORCH_COMPILE, operator)
    for shape in suite_v1.shapes_for(operator, "smoke"):
        inputs = spec.make_inputs(device="cpu", seed=404, **shape.input_kwargs)
        reference = spec.build_reference(shape.init_kwargs)(
            **{name: value.clone() for name, value in inputs.items()}
        )
        candidate = module.Model(**shape.init_kwargs)(**inputs)
        result = compare_outputs(reference, candidate, policy=spec.policy, shape_id=shape.shape_id)
        assert result.ok, result.error
