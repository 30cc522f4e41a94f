"""A shape whose first correctness call launched none of the bundle's own kernels is a
fallback decided on that call; its other correctness calls are checked but not watched
(``evaluator.fallback.ShapeWatch``, docs/decisions.md 16).

The shapes run through ``evaluator.measure.evaluate_shape`` in this process, as the child
runs them (the bundle's folder, the suite's threshold), with Triton in the interpreter.
The calls the CPU monitor watched are counted at the monitor itself. "Before" is the same
evaluation with every call watched (the harness before 0.3.2).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from evaluator import fallback
from evaluator.child import import_candidate
from evaluator.fallback import ShapeWatch, prepare_monitoring
from evaluator.fallback_cpu import FallbackMonitor
from evaluator.fallback_cuda import MEMCPY, MEMSET, CudaFallbackMonitor, DeviceActivity
from evaluator.fallback_report import FIRST_CALL_DECIDED_WARNING
from evaluator.hardware import get_profile
from evaluator.measure import evaluate_shape
from evaluator.operators import get_operator
from evaluator.results import shape_entry
from evaluator.suite import ShapeSpec

from .conftest import PYTORCH_EAGER, REPO, TRITON_BASELINE

CPU = torch.device("cpu")
SWITCH = REPO / "tests" / "evaluator" / "bundles" / "fallback" / "first_call_switch"
INPUT_KWARGS = {"token_count": 3, "hidden_size": 200}
THRESHOLD = 0.8
TRIALS = get_operator("rms_norm").policy.trials
CUBLAS = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_execute_kernel__5x_cublas"


class EveryCallWatched(ShapeWatch):
    """The harness before 0.3.2: every correctness call watched, whatever the first did."""

    def __init__(self, monitor: Any, *, decide_on_first_call: bool) -> None:
        super().__init__(monitor, decide_on_first_call=False)


@pytest.fixture
def evaluate(monkeypatch) -> Iterator[Callable[..., tuple[dict[str, Any], int, int]]]:
    """``evaluate(bundle, threshold=..., before=False)``: the child's record of one small
    rms_norm shape of ``bundle``, the calls the CPU monitor watched, the candidate's calls."""
    monkeypatch.setattr(sys, "path", list(sys.path))  # import_candidate puts the bundle first
    imported: list[str] = []
    watched: list[int] = []
    true_call = FallbackMonitor.call

    def counted(self: FallbackMonitor, fn: Callable[[], Any]) -> Any:
        watched.append(1)
        return true_call(self, fn)

    monkeypatch.setattr(FallbackMonitor, "call", counted)
    prepare_monitoring(CPU)

    def run(
        bundle: Path, *, threshold: float | None = THRESHOLD, before: bool = False
    ) -> tuple[dict[str, Any], int, int]:
        watched.clear()
        with monkeypatch.context() as patch:
            if before:
                patch.setattr(fallback, "ShapeWatch", EveryCallWatched)
            module = import_candidate(bundle / "rms_norm.py", "rms_norm", bundle)
            imported.append(module.__name__)
            calls: list[int] = []

            class Counted(module.Model):  # type: ignore[name-defined,misc]
                def forward(self, *args: Any, **kwargs: Any) -> Any:
                    calls.append(1)
                    return super().forward(*args, **kwargs)

            job = {
                "operator": "rms_norm",
                "device": "cpu",
                "seed": 20261202,
                "time_budget_s": 0.01,
                "bundle_dir": str(bundle),
                "threshold_own_share": threshold,
            }
            shape = {
                "shape_id": "0",
                "init_kwargs": {"eps": 1e-6},
                "input_kwargs": INPUT_KWARGS,
                "q_read": 3 * 200 * 2 + 200 * 2,
                "q_write": 3 * 200 * 2,
            }
            record = evaluate_shape(job=job, shape=shape, model_class=Counted)
        return record, len(watched), len(calls)

    yield run
    for name in imported:
        sys.modules.pop(name, None)


def switch_bundle(tmp_path: Path, *, own_on: list[int], wrong_on: list[int] = ()) -> Path:
    """A copy of the ``first_call_switch`` fixture with its schedule (calls numbered from 1)."""
    bundle = tmp_path / "first_call_switch"
    shutil.copytree(SWITCH, bundle)
    schedule = {"own_on": list(own_on), "wrong_on": list(wrong_on)}
    (bundle / "schedule.json").write_text(json.dumps(schedule))
    return bundle


def entry_of(record: dict[str, Any]) -> dict[str, Any]:
    """The shape's entry of results.json, as the runner makes it from the record."""
    shape = ShapeSpec(
        operator="rms_norm",
        shape_id="0",
        init_kwargs={"eps": 1e-6},
        input_kwargs=INPUT_KWARGS,
        weight=1.0,
        w_flops={"fp32": 4 * 3 * 200},
        q_read=1,
        q_write=1,
    )
    return shape_entry(
        shape,
        status=str(record["status"]),
        measurement=record,
        hardware=get_profile("cpu-dev"),
        threshold_own_share=THRESHOLD,
    )


# --------------------------------------------------------------------------- the child's shape


def test_a_pytorch_bundle_is_decided_on_its_first_call_with_the_same_verdict(evaluate):
    record, watched, calls = evaluate(PYTORCH_EAGER)
    # Decided on the first call, which was checked: no later trial runs (harness 0.3.6).
    assert (watched, calls, record["trials"], record["watched_calls"]) == (1, 1, 1, 1)
    assert record["fallback_decided_on_first_call"] is True
    assert FIRST_CALL_DECIDED_WARNING in record["warnings"]
    assert any(op["op"].startswith("aten.") for op in record["top_ops"]), record["top_ops"]
    before, watched_before, _ = evaluate(PYTORCH_EAGER, before=True)
    assert watched_before == TRIALS and before["fallback_decided_on_first_call"] is False
    assert before["trials"] == TRIALS
    for key in ("status", "own_kernel_share", "not_timed", "time_s"):
        assert record.get(key) == before.get(key), key
    assert record["own_kernel_share"] == 0.0 and record["not_timed"] is True
    entry, entry_before = entry_of(record), entry_of(before)
    assert entry["status"] == entry_before["status"] == "fallback"
    assert entry["codes"] == entry_before["codes"] == ["fallback"]
    assert entry["fallback_decided_on_first_call"] is True
    assert "decided on its first correctness call" in entry["error"]
    assert "decided" not in entry_before["error"]


def test_without_a_threshold_above_zero_nothing_is_decided(evaluate):
    # A share of 0 is no fallback under a threshold of 0: the shape is timed, so watched.
    record, watched, _ = evaluate(PYTORCH_EAGER, threshold=0.0)
    assert watched == TRIALS and record["fallback_decided_on_first_call"] is False
    assert record.get("not_timed") is None and record["time_s"] > 0


def test_an_honest_triton_bundle_is_watched_on_every_trial(evaluate):
    record, watched, calls = evaluate(TRITON_BASELINE)
    assert watched == TRIALS and record["watched_calls"] == TRIALS
    assert record["fallback_decided_on_first_call"] is False
    assert FIRST_CALL_DECIDED_WARNING not in record["warnings"]
    assert record["status"] == "pass" and record["own_kernel_share"] >= THRESHOLD, record
    assert calls > TRIALS and record["time_s"] > 0  # timed as before
    assert entry_of(record)["status"] == "pass"


def test_own_kernel_first_then_pytorch_stays_watched_and_is_judged_as_before(evaluate, tmp_path):
    bundle = switch_bundle(tmp_path, own_on=[1])
    record, watched, _ = evaluate(bundle)
    assert watched == TRIALS and record["fallback_decided_on_first_call"] is False
    before, watched_before, _ = evaluate(bundle, before=True)
    assert watched_before == TRIALS
    entry, entry_before = entry_of(record), entry_of(before)
    assert entry["status"] == entry_before["status"] == "fallback", (entry, entry_before)
    assert entry["codes"] == entry_before["codes"] == ["fallback"]
    assert record["own_kernel_share"] < THRESHOLD and before["own_kernel_share"] < THRESHOLD
    assert "decided" not in entry["error"]


def test_pytorch_first_then_own_kernels_is_a_fallback(evaluate, tmp_path):
    # Its later calls are its own kernels (by their median a pass, when every call was
    # watched): the first call's PyTorch decided it, and nothing after could undo that.
    record, watched, calls = evaluate(switch_bundle(tmp_path, own_on=list(range(2, 40))))
    assert (watched, calls, record["watched_calls"]) == (1, 1, 1)
    assert record["status"] == "pass" and record["not_timed"] is True
    assert record["own_kernel_share"] == 0.0 and record["fallback_decided_on_first_call"]
    entry = entry_of(record)
    assert entry["status"] == "fallback" and entry["time_ms"] is None
    assert entry["roofline_fraction"] is None


def test_a_wrong_first_answer_is_caught_and_a_decided_shape_runs_no_later_trial(evaluate, tmp_path):
    # Wrong on its first (PyTorch) call: checked before anything is decided, incorrect.
    record, watched, calls = evaluate(switch_bundle(tmp_path, own_on=[], wrong_on=[1]))
    assert watched == 1 and calls == 1
    assert record["status"] == "incorrect" and record["codes"] == ["wrong_result"]
    assert record["trials"] == 1 and "max abs error" in record["error"]
    assert entry_of(record)["status"] == "incorrect"
    # Wrong only on its second call: decided a fallback on the first, the second never
    # runs; it scores 0 either way. Watched on every call (before 0.3.6), it was caught.
    later, watched, calls = evaluate(switch_bundle(tmp_path / "later", own_on=[], wrong_on=[2]))
    assert (watched, calls, later["trials"]) == (1, 1, 1)
    assert entry_of(later)["status"] == "fallback"
    before, _, calls_before = evaluate(
        switch_bundle(tmp_path / "before", own_on=[], wrong_on=[2]), before=True
    )
    assert calls_before == 2 and before["status"] == "incorrect"


# --------------------------------------------------------------------------- CUDA's decision


class ScriptedCudaMonitor(CudaFallbackMonitor):
    """The CUDA monitor with each call's device activities given instead of profiled."""

    def __init__(self, own_code_dir: Path, script: list[list[DeviceActivity]]) -> None:
        super().__init__(own_code_dir=own_code_dir, calls=len(script))
        self.script = script

    def call(self, fn: Callable[[], Any]) -> Any:
        result = fn()
        self.call_activities.append(self.script[len(self.call_activities)])
        return result


def load_module(path: Path) -> Any:
    """Import ``path`` as a loaded module (in ``sys.modules``, where origins are looked for)."""
    name = f"fallback_first_call_{path.parent.name}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def kernel(name: str, us: int = 10, kind: str = "kernel") -> DeviceActivity:
    # The first of several calls is profiled for its device activity only: no launcher.
    return DeviceActivity(name=name, duration_ns=us * 1000, kind=kind)


def watch_three_calls(monitor: CudaFallbackMonitor) -> ShapeWatch:
    watch = ShapeWatch(monitor, decide_on_first_call=True)
    for _ in range(3):
        watch.call(lambda: None)
    return watch


@pytest.mark.parametrize(
    "first_call",
    [
        [kernel(CUBLAS, us=50), kernel("Memset (Device)", kind=MEMSET)],
        [kernel("Memcpy HtoD (Pageable -> Device)", kind=MEMCPY)],
        [],
    ],
    ids=["cublas", "copy-only", "nothing"],
)
def test_cuda_first_call_without_an_own_kernel_decides_the_shape(tmp_path, first_call):
    own = DeviceActivity(name="anything_at_all", duration_ns=10**6, launched_by=None)
    monitor = ScriptedCudaMonitor(tmp_path, [first_call, [own], [own]])
    watch = watch_three_calls(monitor)
    assert monitor.calls == 1 and (watch.watched_calls, watch.unwatched_calls) == (1, 2)
    report = watch.report(q_bytes=None)
    assert report.own_kernel_share == 0.0 and report.decided_on_first_call
    assert report.observed_call_s is None and FIRST_CALL_DECIDED_WARNING in report.warnings
    if first_call and first_call[0].name == CUBLAS:
        assert report.top_ops[0]["op"] == CUBLAS and report.top_ops[0]["calls"] == 1


def test_cuda_first_call_with_an_own_kernel_is_watched_on_every_call(tmp_path):
    (tmp_path / "own_kernels.py").write_text(
        "import triton\n\n\n@triton.jit\ndef _scripted_own_kernel(x_ptr):\n    pass\n"
    )
    module = load_module(tmp_path / "own_kernels.py")
    try:
        first = [kernel("_scripted_own_kernel", us=1000)]
        steady = [
            DeviceActivity(name="_scripted_own_kernel", duration_ns=10_000),
            DeviceActivity(name=CUBLAS, duration_ns=30_000, launched_by="aten::mm"),
        ]
        monitor = ScriptedCudaMonitor(tmp_path, [first, steady, steady])
        watch = watch_three_calls(monitor)
        assert monitor.calls == 3 and watch.unwatched_calls == 0
        report = watch.report(q_bytes=None)
        # The share is over the calls after the first, as before: 10 of 40 us.
        assert report.own_kernel_share == pytest.approx(0.25)
        assert not report.decided_on_first_call
        assert FIRST_CALL_DECIDED_WARNING not in report.warnings
    finally:
        sys.modules.pop(module.__name__, None)


def test_cuda_own_kernel_name_outside_the_bundles_modules_is_found_by_the_full_look(tmp_path):
    # The quick look reads the bundle's modules only; a JIT function of the bundle held
    # only by another module is found when every module is read, and nothing is decided.
    bundle, elsewhere = tmp_path / "bundle", tmp_path / "elsewhere"
    bundle.mkdir()
    elsewhere.mkdir()
    (bundle / "kernels.py").write_text(
        "import triton\n\n\n@triton.jit\ndef _held_elsewhere_kernel(x_ptr):\n    pass\n"
    )
    (elsewhere / "holder.py").write_text("KERNEL = None\n")
    kernels = load_module(bundle / "kernels.py")
    holder = load_module(elsewhere / "holder.py")
    holder.KERNEL = kernels._held_elsewhere_kernel
    del kernels._held_elsewhere_kernel
    try:
        monitor = ScriptedCudaMonitor(bundle, [[kernel("_held_elsewhere_kernel")]] * 3)
        watch = watch_three_calls(monitor)
        assert monitor.calls == 3 and not watch.decided_on_first_call
    finally:
        sys.modules.pop(kernels.__name__, None)
        sys.modules.pop(holder.__name__, None)
