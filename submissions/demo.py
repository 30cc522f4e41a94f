"""The example bundles that seed the demo board (and that the tests submit)."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

from django.conf import settings

EXAMPLE_BUNDLES_DIR = Path(settings.BASE_DIR) / "examples" / "bundles"
# (folder under examples/bundles, shown as a baseline on the board)
DEMO_BUNDLES = [("triton-baseline", True), ("pytorch-eager", True)]


def zip_folder(folder: Path) -> bytes:
    """The folder's files as a zip archive, paths relative to the folder."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                archive.write(path, path.relative_to(folder).as_posix())
    return buffer.getvalue()
