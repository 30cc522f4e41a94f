"""The web side imports only the evaluator's web-safe modules: each imports without torch.

The site's image has no torch (docs/architecture.md, "The boundary"). Every ``evaluator``
module that a Django app imports (found by reading the apps' source, not listed by hand)
must import in a fresh interpreter where torch cannot be imported at all, and must be one
of ``evaluator.WEB_SAFE_MODULES``, the package's own statement of its split.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import evaluator

REPO = Path(__file__).resolve().parents[2]
WEB_APPS = (
    "atrex_site",
    "accounts",
    "agents",
    "catalogue",
    "leaderboard",
    "submissions",
    "traces",
    "fleet",
    "atrex_cli",
)

# Run in a fresh interpreter: torch (and triton, which needs it) cannot be imported, then
# each module named on the command line is imported; prints {module: error or null}.
PROBE = """
import importlib, importlib.abc, json, sys

class NoTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "triton"):
            raise ModuleNotFoundError(f"No module named {name!r} (blocked)", name=name)
        return None

sys.meta_path.insert(0, NoTorch())
outcome = {}
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
        outcome[name] = None
    except BaseException as exc:
        outcome[name] = f"{type(exc).__name__}: {exc}"
outcome["torch loaded"] = "torch" in sys.modules
print(json.dumps(outcome))
"""


def _imported_names(tree: ast.AST) -> set[str]:
    """Every ``evaluator`` module named by an import in ``tree`` (at any depth: an import
    inside a function runs in the web process too)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names if a.name.split(".")[0] == "evaluator")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] != "evaluator":
                continue
            names.add(node.module)
            # ``from evaluator import x``: x may be a submodule.
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                if _is_module(candidate):
                    names.add(candidate)
    return names


def _is_module(name: str) -> bool:
    path = REPO.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def web_imported_modules() -> dict[str, set[str]]:
    """``evaluator`` module -> the web files that import it."""
    found: dict[str, set[str]] = {}
    for app in WEB_APPS:
        for path in sorted((REPO / app).rglob("*.py")) if (REPO / app).is_dir() else ():
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for name in _imported_names(tree):
                found.setdefault(name, set()).add(str(path.relative_to(REPO)))
    return found


def probe(modules: list[str]) -> dict[str, object]:
    completed = subprocess.run(
        [sys.executable, "-c", PROBE, *modules],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout.splitlines()[-1])


def test_the_web_side_imports_some_evaluator_modules():
    # The scan must see the imports it is meant to check (a scan that finds none proves
    # nothing): the site reads suites, errors and the harness version from the evaluator.
    modules = web_imported_modules()
    assert {"evaluator", "evaluator.errors", "evaluator.suite", "evaluator.launch"} <= set(modules)


def test_every_evaluator_module_the_web_imports_imports_without_torch():
    modules = sorted(web_imported_modules())
    outcome = probe(modules)
    failed = {name: outcome[name] for name in modules if outcome[name] is not None}
    assert not failed, f"evaluator modules the web imports need torch: {failed}"
    assert outcome["torch loaded"] is False


def test_every_evaluator_module_the_web_imports_is_declared_web_safe():
    used = web_imported_modules()
    undeclared = {name: sorted(files) for name, files in used.items()}
    for name in evaluator.WEB_SAFE_MODULES:
        undeclared.pop(name, None)
    assert not undeclared, (
        "the web imports evaluator modules that evaluator.WEB_SAFE_MODULES does not list "
        f"(list them there if they import without torch): {undeclared}"
    )


def test_every_declared_web_safe_module_imports_without_torch():
    declared = sorted(evaluator.WEB_SAFE_MODULES)
    assert all(_is_module(name) for name in declared), declared
    outcome = probe(declared)
    failed = {name: outcome[name] for name in declared if outcome[name] is not None}
    assert not failed, f"modules declared web-safe need torch: {failed}"


@pytest.mark.parametrize("module", ["evaluator.correctness", "evaluator.timing"])
def test_the_probe_fails_a_module_that_imports_torch_at_top_level(module):
    # The blocker works: a module known to import torch at its top fails in the probe.
    assert probe([module])[module] is not None
