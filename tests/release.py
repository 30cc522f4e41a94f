"""Where the public Atrex-Bench release data lies for tests: ``ATREX_BENCH_DIR``, else the
``shared/atrex-bench`` folder beside the repository (as on developers' machines and CI).

Tests that need it call ``require_release()``: it skips when the data is absent, except when
``ATREX_TEST_REQUIRE_RELEASE=1`` (CI sets it), where a missing copy is a failure.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
RELEASE_DIR = Path(os.environ.get("ATREX_BENCH_DIR", REPO_ROOT.parent / "shared" / "atrex-bench"))
DATA_DIR = RELEASE_DIR / "data"
# The words a skip for want of the data starts with (tests/conftest.py counts them).
MISSING_RELEASE = "Atrex-Bench release data not found"


def require_release() -> Path:
    """The release's ``data`` folder, or skip (fail under ATREX_TEST_REQUIRE_RELEASE=1)."""
    if DATA_DIR.is_dir():
        return DATA_DIR
    message = f"{MISSING_RELEASE} at {DATA_DIR} (set ATREX_BENCH_DIR)"
    if os.environ.get("ATREX_TEST_REQUIRE_RELEASE") == "1":
        pytest.fail(message)
    pytest.skip(message)
