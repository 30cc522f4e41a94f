"""bench/full_suite_walltime.py on the CPU: the probe bundle takes an operator from
``--kernels`` where that bundle has it, and the reference elsewhere."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def test_operators_the_kernels_bundle_has_are_its_own_and_the_rest_the_reference(tmp_path):
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    shutil.copy(REPO / "examples/bundles/triton-baseline/rms_norm.py", kernels)
    out = tmp_path / "results.json"
    command = [
        sys.executable, "bench/full_suite_walltime.py", "--suite", "atrex-bench-v0.1",
        "--device", "cpu", "--operators", "rms_norm,silu_and_mul", "--kernels", str(kernels),
        "--out", str(out),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads(done.stdout[done.stdout.rindex('{\n "wall_s"') :])
    assert summary["operators"] == 2
    statuses = {
        entry["operator"]: {shape["status"] for shape in entry["shapes"]}
        for entry in json.loads(out.read_text())["operators"]
    }
    assert statuses == {"rms_norm": {"pass"}, "silu_and_mul": {"fallback"}}
