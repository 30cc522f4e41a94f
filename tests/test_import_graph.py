"""The apps' floors: ``catalogue`` at the bottom, ``submissions`` on it, ``leaderboard``
on top. A lower floor never imports an upper one, not even inside a function."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# app -> the apps it must never import.
FORBIDDEN = {
    "catalogue": {"submissions", "leaderboard"},
    "submissions": {"leaderboard"},
}


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(
    source: str, *, module: str, is_package: bool = False
) -> list[tuple[int, str]]:
    """Every module that ``source`` (the text of ``module``) imports, anywhere in the file,
    as (line, absolute dotted name); relative imports are resolved against ``module``, and
    ``importlib.import_module("...")`` with a literal name counts as an import."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            found.append((node.lineno, name))
            # ``from pkg import sub``: ``sub`` may itself be a module of ``pkg``.
            found += [(node.lineno, f"{name}.{alias.name}") for alias in node.names]
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append((node.lineno, node.args[0].value))
    return found


def floor_violations(root: Path, forbidden: dict[str, set[str]]) -> list[str]:
    """``path:line imports name`` for each import of a forbidden app under ``root``."""
    problems = []
    for app, banned in sorted(forbidden.items()):
        for path in sorted((root / app).rglob("*.py")):
            module = _module_name(path, root)
            for line, name in imported_modules(
                path.read_text(), module=module, is_package=path.name == "__init__.py"
            ):
                if name.split(".")[0] in banned:
                    problems.append(f"{path.relative_to(root)}:{line} imports {name}")
    return sorted(set(problems))


def test_lower_apps_never_import_upper_ones():
    for app in (*FORBIDDEN, "leaderboard"):
        assert list((ROOT / app).rglob("*.py")), f"{app} has no module: is the path right?"
    assert floor_violations(ROOT, FORBIDDEN) == []


def test_every_kind_of_upward_import_is_caught(tmp_path):
    files = {
        "catalogue/__init__.py": "",
        "catalogue/services.py": (
            "import math\n"
            "from evaluator.suite import Suite\n"
            "from .models import Shape\n"
            "def publish():\n"
            "    from leaderboard.page_cache import board_changed\n"
            "    return board_changed\n"
        ),
        "catalogue/admin.py": "import submissions.models as m\n",
        "catalogue/sub/__init__.py": "from .. import models\n",
        "catalogue/sub/late.py": (
            "import importlib\n"
            "def load():\n"
            "    return importlib.import_module('leaderboard.selectors')\n"
        ),
        "submissions/__init__.py": "",
        "submissions/scores.py": "from catalogue.models import Shape\n",
        "submissions/views.py": "if True:\n    from leaderboard import charts\n",
        "leaderboard/__init__.py": "",
        "leaderboard/views.py": (
            "from submissions.models import Score\nfrom catalogue import selectors\n"
        ),
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)

    assert floor_violations(tmp_path, FORBIDDEN) == [
        "catalogue/admin.py:1 imports submissions.models",
        "catalogue/services.py:5 imports leaderboard.page_cache",
        "catalogue/services.py:5 imports leaderboard.page_cache.board_changed",
        "catalogue/sub/late.py:3 imports leaderboard.selectors",
        "submissions/views.py:2 imports leaderboard",
        "submissions/views.py:2 imports leaderboard.charts",
    ]


@pytest.mark.parametrize(
    ("source", "module", "is_package", "expected"),
    [
        ("from . import services", "catalogue.admin", False, "catalogue.services"),
        ("from .. import services", "catalogue.management.x", False, "catalogue.services"),
        ("from . import views", "leaderboard", True, "leaderboard.views"),
        ("from .models import Score", "submissions.scores", False, "submissions.models"),
    ],
)
def test_relative_imports_resolve_to_their_package(source, module, is_package, expected):
    names = [name for _, name in imported_modules(source, module=module, is_package=is_package)]
    assert expected in names
