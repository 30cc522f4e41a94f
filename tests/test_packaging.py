"""pyproject.toml's package list: a wheel holds every Django app of this repository whole
(its sub-packages: migrations, management commands, ...) and the data files its packages
read.

The list is built from pyproject.toml the way setuptools builds it (``packages.find``, with
namespace packages unless turned off), so a new app or sub-package left out fails here, not
after an install. Not in the wheel, by design: ``templates/`` and ``static/`` (read by the
settings from the source tree, ``BASE_DIR``, as the Docker images run it), ``security/``
(the accepted findings of ``scripts/``, development tools) and ``tests/``, ``examples/``.
"""

from __future__ import annotations

import fnmatch
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
from django.apps import apps
from setuptools import find_namespace_packages, find_packages

from tests.release import REPO_ROOT

SETUPTOOLS = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def shipped_packages() -> set[str]:
    """The packages ``pip install .`` puts in the wheel, from pyproject.toml."""
    find = SETUPTOOLS["packages"]["find"]
    finder = find_namespace_packages if find.get("namespaces", True) else find_packages
    (where,) = find.get("where", ["."])
    return set(
        finder(
            where=str(REPO_ROOT / where),
            include=find.get("include", ["*"]),
            exclude=find.get("exclude", []),
        )
    )


def repository_apps() -> dict[str, Path]:
    """Installed apps whose module is a package of this repository: label -> its folder."""
    return {
        config.name: Path(config.path)
        for config in apps.get_app_configs()
        if Path(config.path) == REPO_ROOT / Path(*config.name.split("."))
    }


def python_packages_under(folder: Path, dotted: str) -> set[str]:
    """``dotted`` and every folder below it that holds Python modules, as dotted names."""
    found = {dotted}
    for path in folder.rglob("*.py"):
        relative = path.parent.relative_to(folder)
        if "__pycache__" not in relative.parts and relative.parts:
            found.add(".".join((dotted, *relative.parts)))
    return found


def test_every_app_of_this_repository_is_in_the_wheel_with_its_sub_packages():
    shipped = shipped_packages()
    found = repository_apps()
    # The project's own apps, found in INSTALLED_APPS (Django's and third parties' are not).
    assert {"leaderboard", "submissions", "fleet", "accounts", "agents", "traces"} <= set(found)
    missing = {
        package
        for name, folder in found.items()
        for package in python_packages_under(folder, name)
        if package not in shipped
    }
    assert not missing, f"pyproject.toml's packages.find leaves out {sorted(missing)}"


def test_every_data_file_inside_a_shipped_package_is_package_data():
    if shutil.which("git") is None or not (REPO_ROOT / ".git").exists():
        pytest.skip("needs a git checkout to list the tracked files")
    tracked = subprocess.run(  # noqa: S603 - a fixed git command in the repository
        ["git", "ls-files", "-z"],  # noqa: S607
        cwd=REPO_ROOT,
        capture_output=True,
        check=True,
        text=True,
    ).stdout.split("\0")
    shipped = shipped_packages()
    package_data = SETUPTOOLS.get("package-data", {})

    def declared(path: str) -> bool:
        parts = Path(path).parts
        for depth in range(1, len(parts)):
            package = ".".join(parts[:depth])
            if package not in shipped:
                continue
            inside = "/".join(parts[depth:])
            patterns = package_data.get(package, []) + package_data.get("*", [])
            if any(fnmatch.fnmatch(inside, pattern) for pattern in patterns):
                return True
        return False

    data_files = [
        path
        for path in tracked
        if path
        and not path.endswith(".py")
        and ".".join(Path(path).parts[:-1]) in shipped  # a file inside a shipped package
    ]
    assert "evaluator/suites/atrex-bench-v1.json" in data_files  # the suites are read at run time
    undeclared = [path for path in data_files if not declared(path)]
    assert not undeclared, f"not in [tool.setuptools.package-data]: {undeclared}"
