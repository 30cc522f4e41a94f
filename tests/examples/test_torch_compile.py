"""The torch.compile baseline: generated from the references (no copy kept in the tree), one
self-contained file per v1 operator that holds the reference's own code and, on CPU (where
it runs eagerly), equals the reference on every smoke shape."""

from __future__ import annotations

import ast
import inspect
import shutil
import sys

import pytest

from evaluator.correctness import compare_outputs
from evaluator.operators import get_operator
from evaluator.static_scan import scan_sources
from evaluator.suite import load_suite

from .conftest import REPO, TORCH_COMPILE, load_bundle_generator, load_model_module, operators_of

V1_OPERATORS = load_suite("atrex-bench-v1").operator_slugs()
WRAPPER_NAMES = {"_compiled_forward", "_on_cuda", "Model"}
"""What the generator adds around the copied reference code."""


def _imported_modules(tree: ast.AST) -> set[str]:
    plain = [node for node in ast.walk(tree) if isinstance(node, ast.Import)]
    from_modules = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    return {alias.name for node in plain for alias in node.names} | from_modules


def _top_level_definitions(source: str) -> dict[str, str]:
    """Name -> source text of each top-level function and class of ``source``, decorators
    included (as ``inspect.getsource`` gives it)."""
    lines = source.splitlines()
    return {
        node.name: "\n".join(
            lines[
                min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1 : node.end_lineno
            ]
        )
        for node in ast.parse(source).body
        if isinstance(node, ast.FunctionDef | ast.ClassDef)
    }


def _operator_modules_copy(tmp_path):
    """A root with a copy of evaluator/operators/, for the generator to read instead."""
    shutil.copytree(
        REPO / "evaluator" / "operators",
        tmp_path / "evaluator" / "operators",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    return tmp_path


def test_no_operator_file_is_kept_in_the_tree():
    # The committed part is the bundle's README and atrex.toml; every operator file would be
    # a copy of a reference, so it is generated instead.
    assert {path.name for path in TORCH_COMPILE.iterdir() if path.is_file()} == {
        "README.md",
        "atrex.toml",
    }
    assert not list(TORCH_COMPILE.rglob("*.py"))


def test_every_v1_operator_has_a_generated_file_that_imports_nothing_from_the_harness(
    torch_compile_bundle,
):
    generator = load_bundle_generator()
    assert operators_of(torch_compile_bundle) == set(V1_OPERATORS)
    assert {path.name for path in torch_compile_bundle.iterdir() if path.suffix != ".py"} == {
        "README.md",
        "atrex.toml",
    }
    for path in torch_compile_bundle.glob("*.py"):
        source = path.read_text()
        imported = _imported_modules(ast.parse(source))
        assert not any(str(name).startswith("evaluator") for name in imported), path.name
        assert "torch.compile(Reference.forward)" in source, path.name
        assert generator.GENERATED_MARK in source, path.name


def test_the_static_scan_finds_only_the_torch_compile_call_in_each_file(torch_compile_bundle):
    files = {path.name: path.read_text() for path in torch_compile_bundle.glob("*.py")}
    findings = scan_sources(files)
    # One finding a file, the compile call itself: no harness import, no other pattern.
    assert sorted(finding.split(":")[0] for finding in findings) == sorted(files)
    assert all(": torch.compile: " in finding for finding in findings), findings


@pytest.mark.parametrize("operator", V1_OPERATORS)
def test_each_file_holds_the_reference_code_as_written(torch_compile_bundle, operator):
    spec = get_operator(operator)
    generated = _top_level_definitions((torch_compile_bundle / f"{operator}.py").read_text())
    reference = inspect.getsource(spec.model_class)
    renamed = "class Reference(" + reference.removeprefix("class Model(")
    assert generated["Reference"] == renamed.rstrip("\n")
    # Every helper copied in is the text of a helper of that name where it is defined, the
    # operator's module or a shared evaluator/operators/_*.py one.
    for name in set(generated) - WRAPPER_NAMES - {"Reference"}:
        originals = {
            inspect.getsource(vars(module)[name]).rstrip("\n")
            for module_name, module in list(sys.modules.items())
            if module_name.startswith("evaluator.operators.")
            and getattr(vars(module).get(name), "__module__", None) == module_name
        }
        assert generated[name] in originals, (operator, name)


@pytest.mark.parametrize("operator", V1_OPERATORS)
def test_model_equals_the_reference_on_the_smoke_shapes(suite_v1, torch_compile_bundle, operator):
    spec = get_operator(operator)
    module = load_model_module(torch_compile_bundle, operator)
    for shape in suite_v1.shapes_for(operator, "smoke"):
        inputs = spec.make_inputs(device="cpu", seed=404, **shape.input_kwargs)
        reference = spec.build_reference(shape.init_kwargs)(
            **{name: value.clone() for name, value in inputs.items()}
        )
        candidate = module.Model(**shape.init_kwargs)(**inputs)
        result = compare_outputs(reference, candidate, policy=spec.policy, shape_id=shape.shape_id)
        assert result.ok, result.error


def test_a_changed_reference_reaches_the_generated_file(tmp_path, suite_v1):
    generator = load_bundle_generator()
    root = _operator_modules_copy(tmp_path / "tree")
    reference_file = root / "evaluator" / "operators" / "rms_norm.py"
    original = "+ self.eps)"
    assert original in reference_file.read_text()
    reference_file.write_text(reference_file.read_text().replace(original, "+ self.eps + 1.0)"))

    out = tmp_path / "bundle"
    generator.write_bundle(out, ["rms_norm"], root=root)

    assert "+ self.eps + 1.0)" in (out / "rms_norm.py").read_text()
    spec = get_operator("rms_norm")
    shape = suite_v1.shapes_for("rms_norm", "smoke")[0]
    inputs = spec.make_inputs(device="cpu", seed=404, **shape.input_kwargs)
    reference = spec.build_reference(shape.init_kwargs)(**inputs)
    candidate = load_model_module(out, "rms_norm").Model(**shape.init_kwargs)(**inputs)
    assert not compare_outputs(reference, candidate, policy=spec.policy, shape_id="s").ok


def test_a_reference_that_needs_the_harness_beyond_the_operator_modules_is_refused(tmp_path):
    generator = load_bundle_generator()
    root = _operator_modules_copy(tmp_path / "tree")
    reference_file = root / "evaluator" / "operators" / "rms_norm.py"
    source = reference_file.read_text()
    source = source.replace(
        "from evaluator.operators.base import",
        "from evaluator.timing import make_timer\nfrom evaluator.operators.base import",
    ).replace("xf = x.float()", "xf = x.float()\n        make_timer")
    reference_file.write_text(source)

    with pytest.raises(generator.GenerationError, match="evaluator.timing"):
        generator.operator_source("rms_norm", root=root)


def test_the_script_replaces_only_its_own_files_and_never_writes_into_the_tree(tmp_path):
    generator = load_bundle_generator()
    out = tmp_path / "bundle"
    out.mkdir()
    (out / "topk_filter.py").write_text(f'"""{generator.GENERATED_MARK} earlier."""\n')
    (out / "_mine.py").write_text("HELPER = 1\n")

    assert generator.main([str(out), "--operators", "rms_norm"]) == 0

    assert sorted(path.name for path in out.iterdir()) == [
        "README.md",
        "_mine.py",
        "atrex.toml",
        "rms_norm.py",
    ]
    assert (out / "atrex.toml").read_text() == (TORCH_COMPILE / "atrex.toml").read_text()
    with pytest.raises(generator.GenerationError):
        generator.write_bundle(TORCH_COMPILE, ["rms_norm"])
