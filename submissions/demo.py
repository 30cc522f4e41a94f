"""The example bundles that seed the demo board (and that the tests submit)."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

from django.conf import settings

EXAMPLE_BUNDLES_DIR = Path(settings.BASE_DIR) / "examples" / "bundles"
# (folder under examples/bundles, shown as a baseline on the board)
DEMO_BUNDLES = [("triton-baseline", True), ("pytorch-eager", True)]


def zip_folder(folder: Path, *, operators: set[str] | None = None) -> bytes:
    """The folder's files as a zip archive, paths relative to the folder. With
    ``operators`` (a suite's operator slugs), operator files of other operators are left
    out, so that a bundle written for a larger suite can be entered in a smaller one."""
    from evaluator.suite import list_suites, load_suite

    every_operator = {slug for name in list_suites() for slug in load_suite(name).operator_slugs()}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            if not path.is_file() or "__pycache__" in path.parts:
                continue
            other_operator = path.stem in every_operator and path.parent == folder
            if operators is not None and other_operator and path.stem not in operators:
                continue
            archive.write(path, path.relative_to(folder).as_posix())
    return buffer.getvalue()
