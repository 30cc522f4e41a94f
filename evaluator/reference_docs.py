"""What the site shows of a built-in operator's reference, without importing torch.

The operator page lets a researcher read what a submission is judged against: the operator
module's documentation, the reference ``Model``, the input generator ``make_inputs`` (with
the helpers both use), the correctness policy, and the input and output dtypes.

Two sources, both static for one harness version:

* the operator modules' text (``evaluator/operators/<slug>.py``), read and cut up with
  ``ast``, never imported (the site has no torch). ``_variants.py`` is never read for
  text: the hidden validation variants' inputs and names stay in the evaluator;
* ``evaluator/operators/facts.json``: per operator, the dtypes of the inputs and outputs
  (measured by running the reference at the v1 suite's smoke shapes on the CPU), the
  effective rule of each output leaf and whether hidden validation variants exist. It is
  written by ``python -m evaluator.reference_docs --write`` where torch is installed;
  ``tests/evaluator/test_reference_docs.py`` checks it against the live operator specs.
"""

from __future__ import annotations

import argparse
import ast
import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

OPERATORS_DIR = Path(__file__).parent / "operators"
FACTS_PATH = OPERATORS_DIR / "facts.json"
FACTS_SUITE = "atrex-bench-v1"
# Modules whose text is never shown: the hidden validation variants (docs/decisions.md 6).
PRIVATE_MODULES = frozenset({"_variants"})
# Names of the operator framework itself: not helpers of a reference.
FRAMEWORK_NAMES = frozenset(
    {"OperatorSpec", "Work", "CorrectnessPolicy", "Fp8CodePolicy", "SPEC", "Model", "nn", "torch"}
)
# How many levels of helpers (a helper's own helpers, ...) are followed.
HELPER_DEPTH = 3


@dataclass(frozen=True)
class SourceBlock:
    """One named piece of source: ``title`` (e.g. ``Model``), the ``module`` it is in and
    its ``text`` as written there."""

    title: str
    module: str
    text: str


@dataclass(frozen=True)
class ReferenceSource:
    """An operator module cut into what a reader needs (texts as in the module)."""

    slug: str
    docstring: str
    reference: SourceBlock | None
    inputs: SourceBlock | None
    helpers: list[SourceBlock] = field(default_factory=list)
    policy: list[SourceBlock] = field(default_factory=list)
    checker_notes: str = ""
    module_text: str = ""


# ----------------------------------------------------------------------------- sources


@cache
def _module(name: str) -> tuple[str, ast.Module] | None:
    """(text, tree) of ``evaluator/operators/<name>.py``; None if absent or private."""
    if name in PRIVATE_MODULES or not name.replace("_", "").isalnum():
        return None
    path = OPERATORS_DIR / f"{name}.py"
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8")
    return text, ast.parse(text)


def _definitions(tree: ast.Module) -> dict[str, ast.stmt]:
    """Top-level name -> its def, class or assignment."""
    found: dict[str, ast.stmt] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            found[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            found[node.target.id] = node
    return found


def _imports(tree: ast.Module) -> dict[str, tuple[str, str]]:
    """Name -> (operators module, name there) for ``from evaluator.operators.X import``."""
    found: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
            "evaluator.operators."
        ):
            module = (node.module or "").rsplit(".", 1)[1]
            for alias in node.names:
                found[alias.asname or alias.name] = (module, alias.name)
    return found


def _names_used(node: ast.AST) -> set[str]:
    return {child.id for child in ast.walk(node) if isinstance(child, ast.Name)}


def _segment(text: str, node: ast.stmt) -> str:
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    lines = text.splitlines()[start - 1 : node.end_lineno]
    return "\n".join(lines)


def _resolve(module: str, name: str) -> tuple[str, ast.stmt] | None:
    """(module, definition) of ``name`` as seen from ``module``, following one import."""
    loaded = _module(module)
    if loaded is None:
        return None
    _, tree = loaded
    local = _definitions(tree).get(name)
    if local is not None:
        return module, local
    imported = _imports(tree).get(name)
    if imported is None:
        return None
    other = _module(imported[0])
    if other is None:
        return None
    found = _definitions(other[1]).get(imported[1])
    return (imported[0], found) if found is not None else None


def _closure(module: str, roots: list[ast.AST], skip: set[str]) -> list[SourceBlock]:
    """The definitions that ``roots`` (in ``module``) use, transitively, in first-use
    order: functions, classes and constants of the operators package."""
    blocks: list[SourceBlock] = []
    seen: set[tuple[str, str]] = set()
    frontier = [(module, sorted(_names_used(root) - skip)) for root in roots]
    for _ in range(HELPER_DEPTH):
        next_frontier = []
        for where, names in frontier:
            for name in names:
                if name in FRAMEWORK_NAMES or name in skip:
                    continue
                found = _resolve(where, name)
                if found is None or (found[0], name) in seen:
                    continue
                seen.add((found[0], name))
                home, node = found
                loaded = _module(home)
                if loaded is None:  # _resolve returns loaded modules only
                    continue
                blocks.append(SourceBlock(name, home, _segment(loaded[0], node)))
                next_frontier.append((home, sorted(_names_used(node) - {name})))
        frontier = next_frontier
    return blocks


def _string_value(module: str, node: ast.expr) -> str:
    """The value of a string expression built from literals, names and ``+``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _string_value(module, node.left) + _string_value(module, node.right)
    if isinstance(node, ast.Name):
        found = _resolve(module, node.id)
        if found and isinstance(found[1], ast.Assign):
            return _string_value(found[0], found[1].value)
    return ""


def _spec_keyword(tree: ast.Module, keyword: str) -> ast.expr | None:
    spec = _definitions(tree).get("SPEC")
    if isinstance(spec, ast.Assign) and isinstance(spec.value, ast.Call):
        for item in spec.value.keywords:
            if item.arg == keyword:
                return item.value
    return None


def is_builtin(slug: str) -> bool:
    """Whether the evaluator implements ``slug`` in a module of its own."""
    return not slug.startswith("_") and _module(slug) is not None


@cache
def reference_source(slug: str) -> ReferenceSource | None:
    """The parts of operator ``slug``'s module; None for an operator without one."""
    loaded = _module(slug) if is_builtin(slug) else None
    if loaded is None:
        return None
    text, tree = loaded
    definitions = _definitions(tree)
    model = definitions.get("Model")
    maker = definitions.get("make_inputs")
    roots: list[ast.AST] = [node for node in (model, maker) if node is not None]
    helpers = _closure(slug, roots, skip={"make_inputs"})
    policy_node = _spec_keyword(tree, "policy")
    policy = _closure(slug, [policy_node], skip=set()) if policy_node is not None else []
    notes = definitions.get("CHECKER_NOTES")
    return ReferenceSource(
        slug=slug,
        docstring=ast.get_docstring(tree) or "",
        reference=SourceBlock("Model", slug, _segment(text, model)) if model else None,
        inputs=SourceBlock("make_inputs", slug, _segment(text, maker)) if maker else None,
        helpers=[block for block in helpers if block.title not in {"Model", "make_inputs"}],
        policy=[block for block in policy if block.title.isupper() or "POLICY" in block.text],
        checker_notes=(
            _string_value(slug, notes.value).strip() if isinstance(notes, ast.Assign) else ""
        ),
        module_text=text,
    )


# ----------------------------------------------------------------------------- facts


@cache
def _facts() -> dict[str, Any]:
    if not FACTS_PATH.is_file():
        return {}
    return json.loads(FACTS_PATH.read_text(encoding="utf-8"))


def operator_facts(slug: str) -> dict[str, Any] | None:
    """``{"inputs": {name: [dtypes]}, "outputs": {leaf: [dtypes]}, "rules": {leaf: rule},
    "trials": n, "validation_variants": bool}`` of a built-in operator, or None."""
    facts = _facts().get("operators", {}).get(slug)
    return dict(facts) if facts else None


def _number(value: float) -> str:
    """A tolerance as written in the policies: powers of two as 2^-k, others plainly."""
    if value == 0:
        return "0"
    for exponent in range(-30, -1):
        if value == 2.0**exponent:
            return f"2^{exponent}"
    text = f"{value:g}"
    if "e" not in text:
        return text
    mantissa, exponent = text.split("e")
    power = f"10^{int(exponent)}"
    return power if mantissa == "1" else f"{mantissa}·{power}"


def _is_exact(rule: dict[str, Any]) -> bool:
    return not (
        rule["rtol"] or rule["atol_scale"] or rule["atol_floor"] or rule["max_mismatch_share"]
    )


def _bound(rule: dict[str, Any]) -> str:
    """The element bound of a value rule: |c - r| <= atol + rtol*|r| in words."""
    rtol, atol_scale, floor = rule["rtol"], rule["atol_scale"], rule["atol_floor"]
    if not atol_scale and not floor:
        return f"|candidate − reference| ≤ rtol·|reference| with rtol = {_number(rtol)}"
    if not atol_scale:
        atol = f"atol = {_number(floor)}"
    else:
        atol = f"atol = {_number(atol_scale)}·max|reference| (never below {_number(floor)})"
    return (
        f"|candidate − reference| ≤ atol + rtol·|reference|, with rtol = {_number(rtol)} and "
        + atol
    )


def describe_rule(rule: dict[str, Any]) -> list[str]:
    """Sentences stating one output leaf's rule (see ``base.CorrectnessPolicy``)."""
    if rule["kind"] == "exact":
        return ["must equal the reference exactly (integer or boolean values)."]
    if rule["kind"] == "fp8_codes":
        share = rule["max_step_share"]
        text = (
            "compared as float8_e4m3fn codes on the e4m3fn grid: every code must equal the "
            f"reference's or be at most {rule['max_steps']} grid step(s) away, and at most "
            f"{share * 100:g}% of the codes may differ at all."
        )
        if rule.get("scale_leaf"):
            text += (
                f" The scales ({rule['scale_leaf']}) are checked first, under their own rule;"
                " the dequantised values (each code times its own side's scale) are then"
                " bounded by one grid step times the reference's scale plus the scale's"
                " error times the code."
            )
        return [text]
    if _is_exact(rule):
        sentences = ["must equal the reference exactly (no tolerance)."]
    else:
        sentences = [f"each element passes when {_bound(rule)}."]
        share = rule["max_mismatch_share"]
        sentences.append(
            "Every element must pass."
            if not share
            else f"At most {share * 100:g}% of the elements may fail."
        )
    if rule.get("tight"):
        tight = rule["tight"]
        sentences.append(
            f"It must also pass a tighter rule, {_bound(tight)}, on all but at most "
            f"{tight['max_mismatch_share'] * 100:g}% of the elements."
        )
    return sentences


# ----------------------------------------------------------------------------- building


def rule_facts(rule: Any, dtype: Any) -> dict[str, Any]:
    """An output leaf's rule (``CorrectnessPolicy.rule_for``) as facts.json states it; an
    integer or boolean leaf (``dtype``) is compared exactly whatever the policy says."""
    import torch

    from evaluator.operators.base import Fp8CodePolicy

    if isinstance(rule, Fp8CodePolicy):
        return {
            "kind": "fp8_codes",
            "max_step_share": rule.max_step_share,
            "max_steps": rule.max_steps,
            "scale_leaf": rule.scale_leaf,
        }
    if dtype is not None and not (dtype.is_floating_point or dtype == torch.float8_e4m3fn):
        return {"kind": "exact"}
    return {
        "kind": "values",
        "rtol": rule.rtol,
        "atol_scale": rule.atol_scale,
        "atol_floor": rule.atol_floor,
        "max_mismatch_share": rule.max_mismatch_share,
        "tight": rule_facts(rule.tight, None) if rule.tight else None,
    }


def _dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def _leaves(output: Any, names: tuple[str, ...]) -> list[tuple[str, Any]]:
    if isinstance(output, dict):
        return list(output.items())
    if isinstance(output, tuple | list):
        return [
            (names[index] if index < len(names) else f"output[{index}]", leaf)
            for index, leaf in enumerate(output)
        ]
    return [(names[0] if names else "out", output)]


def build_facts() -> dict[str, Any]:
    """The facts of every built-in operator, measured at the smoke shapes on the CPU
    (needs torch; the evaluator's environment)."""
    import torch

    from evaluator import HARNESS_VERSION
    from evaluator.operators import OPERATORS
    from evaluator.operators._variants import variants_for
    from evaluator.suite import load_suite

    suite = load_suite(FACTS_SUITE)
    operators: dict[str, Any] = {}
    for slug, spec in sorted(OPERATORS.items()):
        inputs: dict[str, set[str]] = {}
        outputs: dict[str, set[str]] = {}
        rules: dict[str, dict[str, Any]] = {}
        for shape in suite.shapes_for(slug, "smoke"):
            drawn = spec.make_inputs(device="cpu", seed=0, **shape.input_kwargs)
            for name, tensor in drawn.items():
                inputs.setdefault(name, set()).add(_dtype_name(tensor.dtype))
            with torch.no_grad():
                result = spec.build_reference(shape.init_kwargs)(**drawn)
            for name, leaf in _leaves(result, spec.output_names):
                outputs.setdefault(name, set()).add(_dtype_name(leaf.dtype))
                rules[name] = rule_facts(spec.policy.rule_for(name, leaf.dtype), leaf.dtype)
        operators[slug] = {
            "inputs": {name: sorted(dtypes) for name, dtypes in inputs.items()},
            "outputs": {name: sorted(dtypes) for name, dtypes in outputs.items()},
            "rules": rules,
            "trials": spec.policy.trials,
            "check_dtype": spec.policy.check_dtype,
            "validation_variants": bool(variants_for(slug)),
        }
    return {"harness_version": HARNESS_VERSION, "suite": FACTS_SUITE, "operators": operators}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--write", action="store_true", help=f"write {FACTS_PATH.name}")
    args = parser.parse_args(argv)
    text = json.dumps(build_facts(), indent=1, sort_keys=True) + "\n"
    if args.write:
        FACTS_PATH.write_text(text, encoding="utf-8")
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
