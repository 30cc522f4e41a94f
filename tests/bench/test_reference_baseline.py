"""bench/reference_baseline.py: in compile mode with a precompile pass, on the CPU (inductor's
C++ backend), the timed pass loads every graph the warm-only process compiled; a first call
(a compilation) that runs past its limit is stopped there; compile mode compiles the
operator's own reference, whose code the generated torch.compile bundle holds; baseline
mode checks each operator's eager baseline against its reference on the device, then times
it (a baseline failing the check is recorded incorrect, untimed)."""

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

import reference_baseline  # noqa: E402
from reference_baseline import _COMPILED, FirstCallDeadline, _first_call_s, _model  # noqa: E402

from evaluator.baselines import get_baseline  # noqa: E402
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


SMOKE_OPERATORS = ("rms_norm", "chunk_delta_rule_output", "paged_attention_decode", "fused_moe")


def test_baseline_mode_checks_then_times_each_operators_baseline_on_the_cpu(tmp_path):
    out = tmp_path / "baseline.json"
    argv = [
        "--mode", "baseline", "--device", "cpu", "--hardware", "cpu-dev",
        "--shape-set", "smoke", "--operators", ",".join(SMOKE_OPERATORS),
        "--budget-s", "0.02", "--out", str(out),
    ]  # fmt: skip
    assert reference_baseline.main(argv) == 0
    report = json.loads(out.read_text())
    assert report["mode"] == "baseline" and report["checked_against_reference"] is True
    assert "evaluator/baselines/" in report["what"]
    assert [op["operator"] for op in report["operators"]] == list(SMOKE_OPERATORS)
    suite = load_suite("atrex-bench-v1")
    for entry in report["operators"]:
        expected = [s.shape_id for s in suite.shapes_for(entry["operator"], "smoke")]
        assert [s["shape_id"] for s in entry["shapes"]] == expected
        for shape in entry["shapes"]:
            assert shape["status"] == "pass", shape
            assert shape["time_ms"] > 0 and shape["reps"] >= 3 and shape["roofline_fraction"] > 0


def test_baseline_mode_times_the_baseline_not_the_reference():
    spec = get_operator("layer_norm")
    shape = load_suite("atrex-bench-v1").shapes_for("layer_norm", "smoke")[0]
    model = _model(spec, shape, device="cpu", mode="baseline")
    assert type(model) is get_baseline("layer_norm")
    assert type(_model(spec, shape, device="cpu", mode="eager")) is spec.model_class


class _OffByTwoPercent(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x, weight):
        return torch.nn.functional.rms_norm(x, (x.shape[-1],), weight, self.eps) * 1.02


def test_a_baseline_failing_its_check_is_recorded_incorrect_untimed(tmp_path, monkeypatch):
    monkeypatch.setattr(reference_baseline, "get_baseline", lambda slug: _OffByTwoPercent)
    out = tmp_path / "broken.json"
    argv = [
        "--mode", "baseline", "--device", "cpu", "--hardware", "cpu-dev",
        "--shape-set", "smoke", "--operators", "rms_norm", "--budget-s", "0.02",
        "--out", str(out),
    ]  # fmt: skip
    reference_baseline.main(argv)
    (entry,) = json.loads(out.read_text())["operators"]
    assert entry["shapes"] and {s["status"] for s in entry["shapes"]} == {"incorrect"}
    assert all("outside" in s["error"] and "time_ms" not in s for s in entry["shapes"])
    assert entry["score_if_counted"] == 0.0
