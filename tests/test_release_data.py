"""Tests that need the public release's data say loudly when they skip for want of it,
in the report's header and in a banner at the end, instead of skipping silently."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.release import REPO_ROOT


def test_a_run_without_the_release_data_says_so_in_the_header_and_at_the_end(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "ATREX_TEST_REQUIRE_RELEASE"}
    env["ATREX_BENCH_DIR"] = str(tmp_path / "no-release-here")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/evaluator/test_hardware.py",
         "-p", "no:cacheprovider", "-rs"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    out = done.stdout
    assert done.returncode == 0, out[-2000:]
    assert f"release data NOT FOUND at {tmp_path / 'no-release-here' / 'data'}" in out
    skipped = sum(
        int(line.split("[", 1)[1].split("]", 1)[0])
        for line in out.splitlines()
        if line.startswith("SKIPPED [") and "release data not found" in line
    )
    assert skipped >= 1
    assert f"{skipped} tests SKIPPED: the public Atrex-Bench release data is missing" in out
