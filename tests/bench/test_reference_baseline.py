"""bench/reference_baseline.py in compile mode with a precompile pass, on the CPU (inductor's
C++ backend): the timed pass loads every graph the warm-only process compiled."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def test_a_precompiled_compile_baseline_loads_every_graph_from_the_shared_cache(tmp_path):
    out = tmp_path / "compile.json"
    command = [
        sys.executable, "bench/reference_baseline.py", "--mode", "compile", "--dynamic",
        "--device", "cpu", "--suite", "atrex-bench-v0.1", "--shape-set", "smoke",
        "--hardware", "cpu-dev", "--operators", "silu_and_mul", "--precompile-jobs", "1",
        "--budget-s", "0.05", "--out", str(out),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("TORCHINDUCTOR_CACHE_DIR", None)
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text())
    assert report["precompile"]["jobs"] == [{"operators": ["silu_and_mul"], "exit_code": 0}]
    assert Path(report["precompile"]["cache_dir"]) == out.with_suffix(".inductor-cache")
    warm = json.loads((tmp_path / "compile.warm-0.json").read_text())
    (warmed,) = warm["operators"]
    assert warmed["inductor_cache"]["misses"] >= 1  # the warm process compiled
    assert {s["status"] for s in warmed["shapes"]} == {"warmed"}
    (timed,) = report["operators"]
    # The timed pass compiled nothing: every graph came from the cache.
    assert timed["inductor_cache"]["misses"] == 0
    assert timed["inductor_cache"]["hits"] == warmed["inductor_cache"]["misses"]
    assert [s["status"] for s in timed["shapes"]] == ["pass"] * len(warmed["shapes"])
