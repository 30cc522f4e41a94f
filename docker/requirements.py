"""Print the project's dependencies from pyproject.toml, one per line, for ``pip install -r``.

The images install the dependencies, not the project (the code runs from /app), so a code
change rebuilds only the last layer. ``--extra evaluator`` adds that extra's packages;
``--without torch,triton`` leaves out what the base image already brings (the GPU image
installs torch from the CUDA wheel index first, and a PyPI torch must not replace it).
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def requirements(*, extras: list[str], without: set[str]) -> list[str]:
    """The project's dependencies plus ``extras``, minus the distributions in ``without``."""
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    listed = list(project["dependencies"])
    optional = project.get("optional-dependencies", {})
    for extra in extras:
        if extra not in optional:
            raise SystemExit(f"pyproject.toml has no extra {extra!r} (has: {sorted(optional)})")
        listed.extend(optional[extra])
    kept = []
    for requirement in listed:
        name = re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower()
        if name not in without:
            kept.append(requirement)
    return kept


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extra", action="append", default=[], help="an optional extra")
    parser.add_argument("--without", default="", help="comma-separated distributions to skip")
    args = parser.parse_args(argv)
    without = {name.strip().lower() for name in args.without.split(",") if name.strip()}
    sys.stdout.write("\n".join(requirements(extras=args.extra, without=without)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
