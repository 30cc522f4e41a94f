"""bench/reference_baseline.py: in compile mode with a precompile pass, on the CPU (inductor's
C++ backend), the timed pass loads every graph the warm-only process compiled; a first call
(a compilation) that runs past its limit is stopped there; compile mode compiles the
operator's own reference, whose code the generated torch.compile bundle holds."""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

from reference_baseline import _COMPILED, FirstCallDeadline, _first_call_s, _model  # noqa: E402

from evaluator.operators import get_operator  # noqa: E402
from evaluator.suite import load_suite  # noqa: E402


class _Busy(torch.nn.Module):
    """A first call that takes ``seconds`` of Python work (as dynamo tracing is)."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        until = time.monotonic() + self.seconds
        while time.monotonic() < until:
            pass
        return x * 2


def test_a_first_call_past_its_limit_is_stopped_there_and_the_alarm_is_put_back():
    before = signal.getsignal(signal.SIGALRM)
    started = time.monotonic()
    with pytest.raises(FirstCallDeadline, match="had not returned after 0 s"):
        _first_call_s(_Busy(30.0), {"x": torch.ones(4)}, device="cpu", limit_s=0.2)
    assert time.monotonic() - started < 5.0
    assert signal.getsignal(signal.SIGALRM) is before
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    # Inside its limit (or with none) the call is timed as before.
    assert 0.05 <= _first_call_s(_Busy(0.05), {"x": torch.ones(4)}, device="cpu", limit_s=5) < 5
    assert _first_call_s(_Busy(0.0), {"x": torch.ones(4)}, device="cpu") < 5


@pytest.mark.slow
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


def test_compile_mode_compiles_the_operators_reference_which_the_generated_bundle_holds():
    spec = get_operator("rms_norm")
    shape = load_suite("atrex-bench-v1").shapes_for("rms_norm", "smoke")[0]
    _COMPILED.clear()
    try:
        model = _model(spec, shape, device="cpu", mode="compile")
    finally:
        _COMPILED.clear()
    # The board's torch.compile row: the reference class itself, its forward compiled (lazily:
    # nothing is compiled until a first call).
    assert type(model) is spec.model_class
    compiled = model.forward._torchdynamo_orig_callable
    assert getattr(compiled, "__func__", compiled) is spec.model_class.forward
    # The example bundle runs that class's code, generated from it, not a copy kept apart.
    script = REPO / "scripts" / "make_torch_compile_bundle.py"
    loader = importlib.util.spec_from_file_location("make_torch_compile_bundle", script)
    generator = importlib.util.module_from_spec(loader)
    sys.modules[loader.name] = generator
    loader.loader.exec_module(generator)
    reference = inspect.getsource(spec.model_class).removeprefix("class Model(")
    assert "class Reference(" + reference in generator.operator_source("rms_norm")
