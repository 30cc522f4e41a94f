"""No file-level import cycle inside ``submissions/``: every import counts, those inside
functions too (a lazy import hides a cycle from Python, not from a reader); only imports
under ``if TYPE_CHECKING:``, which never run, are left out."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[2] / "submissions"


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None) if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST):
    """Every import statement of ``tree``, at any depth, except under TYPE_CHECKING."""
    pending = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        children = list(ast.iter_child_nodes(node))
        if _is_type_checking(node):
            children = list(node.orelse)
        pending.extend(children)


def import_graph(package_dir: Path) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports, anywhere in its file."""
    files = {_module_name(path, package_dir): path for path in package_dir.rglob("*.py")}
    package = package_dir.name
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        is_package = path.name == "__init__.py"
        imported: set[str] = set()
        for node in _imports(ast.parse(path.read_text(), filename=str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".")
                    base = base[: len(base) - node.level + (1 if is_package else 0)]
                    stem = ".".join([*base, node.module] if node.module else base)
                else:
                    stem = node.module or ""
                # ``from . import services`` names a module; ``from .models import X`` a name.
                targets = [f"{stem}.{alias.name}" for alias in node.names] + [stem]
            for target in targets:
                # The longest known module the target is, or is inside.
                while target and target not in files:
                    target = target.rpartition(".")[0]
                if target.split(".")[0] == package and target != name:
                    imported.add(target)
        graph[name] = imported
    # An import of ``pkg.sub`` from ``pkg.sub.mod`` runs ``pkg/__init__``: not a cycle of
    # files that import each other, so a package's own __init__ is left out as a target.
    packages = {name for name, path in files.items() if path.name == "__init__.py"}
    return {name: targets - packages for name, targets in graph.items()}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each cycle found by a depth-first search (as the list of modules around it)."""
    cycles: list[list[str]] = []
    state: dict[str, str] = {}
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = "open"
        path.append(module)
        for target in sorted(graph.get(module, ())):
            if state.get(target) == "open":
                cycles.append(path[path.index(target) :] + [target])
            elif target not in state:
                visit(target)
        path.pop()
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module)
    return cycles


def test_submissions_has_no_import_cycle():
    graph = import_graph(PACKAGE_DIR)
    # The check sees the package: services imports the layer below it.
    assert "submissions.run_split" in graph["submissions.services"]
    assert "submissions.services" in graph["submissions.shards"]
    assert import_cycles(graph) == []


def test_a_cycle_through_an_import_inside_a_function_is_found(tmp_path):
    package = tmp_path / "mypkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "low.py").write_text("from .models import Thing\n")
    (package / "models.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .low import x\nThing = 1\n"
    )
    (package / "high.py").write_text("from . import low\nfrom mypkg.sub import deep\n")
    (package / "sub" / "deep.py").write_text(
        "def later():\n    from ..high import helper\n    return helper\n"
    )
    graph = import_graph(package)
    assert graph["mypkg.sub.deep"] == {"mypkg.high"}
    assert graph["mypkg.high"] == {"mypkg.low", "mypkg.sub.deep"}
    assert import_cycles(graph) == [["mypkg.high", "mypkg.sub.deep", "mypkg.high"]]
    # Without the lazy import there is none.
    (package / "sub" / "deep.py").write_text("def later():\n    return None\n")
    assert import_cycles(import_graph(package)) == []
