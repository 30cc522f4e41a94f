"""Operator-level concurrency (``evaluator.concurrency``): several operators' children at
once, their timing in one exclusive window, end to end on CPU (real children, Triton in
the interpreter), and the re-watch of a watched figure taken beside other children."""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from evaluator.child import import_candidate
from evaluator.cli import operator_costs_from
from evaluator.concurrency import OperatorSlots, concurrency_from
from evaluator.fallback import prepare_monitoring
from evaluator.measure import evaluate_shape
from evaluator.operators import get_operator
from evaluator.runner import dispatch_order, run_bundle
from evaluator.sandbox import Sandbox, SandboxError, SandboxPolicy

from .conftest import KNOWN, REPO, TRITON_BASELINE

pytestmark = pytest.mark.slow

SEED = 20261203
EXPLOITS = REPO / "tests" / "evaluator" / "exploits"
TRIALS = get_operator("rms_norm").policy.trials
REPEATS = 20
CALL_LINE = re.compile(r"^ATREX-CALL (\S+) (\S+)$", re.MULTILINE)
# Appended to an honest operator file: every call of the candidate writes when it began
# and ended (the host's monotonic clock, which the runner's windows use too) to its log.
STAMPED = """

import sys as _stamp_sys
import time as _stamp_time

_Stamped = Model


class Model(_Stamped):
    def forward(self, *args, **kwargs):
        began = _stamp_time.monotonic()
        try:
            return super().forward(*args, **kwargs)
        finally:
            print(f"ATREX-CALL {began!r} {_stamp_time.monotonic()!r}", file=_stamp_sys.stderr,
                  flush=True)
"""


def run(bundle: Path, suite: Any, tmp_path: Path, **kwargs: Any) -> dict[str, Any]:
    kwargs.setdefault("time_budget_s", 0.02)
    return run_bundle(
        bundle_path=bundle,
        suite=suite,
        hardware="cpu-dev",
        device="cpu",
        seed=SEED,
        log_dir=tmp_path / "logs",
        **kwargs,
    )


def two_shapes_each(suite: Any) -> Any:
    """``suite`` with each tiny shape twice (``t0`` and ``t1``): a child then has a safe
    point between its shapes, where it can be paused."""
    return replace(
        suite,
        shapes=tuple(s for shape in suite.shapes for s in (shape, replace(shape, shape_id="t1"))),
    )


def verdicts(results: dict[str, Any]) -> list[tuple[Any, ...]]:
    """What concurrency must not change: per operator its status and verdict, per shape its
    status and codes, in the results' order."""
    return [
        (
            entry["operator"],
            entry["status"],
            entry["verdict"],
            [(s["shape_id"], s["status"], sorted(s["codes"])) for s in entry["shapes"]],
        )
        for entry in results["operators"]
    ]


def test_concurrency_is_read_from_the_option_or_the_environment():
    assert concurrency_from(None, {}) == 1
    assert concurrency_from(None, {"ATREX_CONCURRENCY": "3"}) == 3
    assert concurrency_from("2", {"ATREX_CONCURRENCY": "3"}) == 2
    for bad in ("0", "two", "-1"):
        with pytest.raises(ValueError):
            concurrency_from(bad, {})


def test_the_most_expensive_operators_start_first_and_entries_keep_their_order():
    assert dispatch_order(["a", "b", "c"], None) == ["a", "b", "c"]
    # Without a figure first (it may be the longest), then by cost, ties as given.
    costs = {"a": 1.0, "b": 5.0, "d": 1.0}
    assert dispatch_order(["a", "b", "c", "d"], costs) == ["c", "b", "a", "d"]
    entries: list[dict[str, Any]] = []
    started: list[str] = []
    OperatorSlots(2).run(
        ["c", "b", "a"],
        lambda operator, **_: started.append(operator) or {"operator": operator},
        entries=entries,
        checkpoint=lambda: None,
        order=["a", "b", "c"],
    )
    assert started == ["c", "b", "a"]
    assert [e["operator"] for e in entries] == ["a", "b", "c"]


def test_operator_costs_are_read_from_a_mapping_or_a_results_document(tmp_path):
    mapping = tmp_path / "costs.json"
    mapping.write_text(json.dumps({"rms_norm": 12.5, "l2_norm": 3}))
    assert operator_costs_from(str(mapping)) == {"rms_norm": 12.5, "l2_norm": 3.0}
    results = tmp_path / "results.json"
    results.write_text(
        json.dumps({"operators": [{"operator": "rms_norm", "wall_s": 9.0}, {"operator": "x"}]})
    )
    assert operator_costs_from(str(results)) == {"rms_norm": 9.0}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"rms_norm": "slow"}))
    with pytest.raises(ValueError, match="neither"):
        operator_costs_from(str(bad))
    with pytest.raises(ValueError, match="cannot read"):
        operator_costs_from(str(tmp_path / "missing.json"))


def test_one_slot_evaluates_in_the_calling_thread_and_checkpoints_before_each_next(tmp_path):
    seen: list[tuple[str, int]] = []
    entries: list[dict[str, Any]] = []
    OperatorSlots(1).run(
        ["a", "b", "c"],
        lambda operator: seen.append((operator, len(entries))) or {"operator": operator},
        entries=entries,
        checkpoint=lambda: seen.append(("checkpoint", len(entries))),
    )
    assert seen == [("a", 0), ("checkpoint", 1), ("b", 1), ("checkpoint", 2), ("c", 2)]
    assert [e["operator"] for e in entries] == ["a", "b", "c"]


def test_two_at_once_gives_the_same_verdicts_and_statuses_as_one_at_a_time(tiny_suite, tmp_path):
    suite = two_shapes_each(tiny_suite)
    alone = run(TRITON_BASELINE, suite, tmp_path / "one")
    checkpoint = tmp_path / "two.partial.json"
    # Costs that start the last operator first: the entries keep the suite's order.
    costs = {op: float(i) for i, op in enumerate(KNOWN)}
    together = run(
        TRITON_BASELINE,
        suite,
        tmp_path / "two",
        concurrency=2,
        checkpoint_path=checkpoint,
        operator_costs=costs,
    )
    assert verdicts(together) == verdicts(alone)
    assert [e["operator"] for e in together["operators"]] == list(KNOWN)
    assert all(e["verdict"] == "pass" for e in together["operators"])
    assert "concurrency" not in alone["environment"]
    assert together["environment"]["concurrency"]["slots"] == 2
    assert len(together["environment"]["concurrency"]["windows"]) == 2 * len(KNOWN)
    # The last checkpoint holds the operators finished before the last one, in suite order.
    partial = json.loads(checkpoint.read_text())
    done = [e["operator"] for e in partial["operators"]]
    assert partial["partial"] is True and done == [op for op in KNOWN if op in done]
    assert (
        sorted(done + partial["operators_pending"]) == sorted(KNOWN)
        and partial["operators_pending"]
    )


def test_children_started_ahead_by_an_operators_thread_outlive_it(tiny_suite, tmp_path):
    # Each operator's thread starts the next one's child ahead; a child is killed when the
    # thread that forked it ends (PR_SET_PDEATHSIG), unless evaluator.spawner started it.
    results = run(
        TRITON_BASELINE, two_shapes_each(tiny_suite), tmp_path, concurrency=2, start_ahead=True
    )
    assert results["environment"]["start_ahead"] is True
    assert all(e["verdict"] == "pass" for e in results["operators"]), verdicts(results)


def test_timing_windows_never_overlap_and_paused_children_run_nothing(
    tiny_suite, tmp_path, make_bundle
):
    files = {f"{op}.py": (TRITON_BASELINE / f"{op}.py").read_text() + STAMPED for op in KNOWN}
    bundle = make_bundle(files)
    results = run(bundle, two_shapes_each(tiny_suite), tmp_path, concurrency=3)
    assert all(e["verdict"] == "pass" for e in results["operators"]), verdicts(results)
    digest = results["environment"]["concurrency"]
    windows = sorted(digest["windows"], key=lambda w: w["granted"])
    assert len(windows) == 2 * len(KNOWN)
    for window in windows:
        assert window["requested"] <= window["granted"] <= window["released"]
    for first, second in zip(windows, windows[1:], strict=False):
        assert first["released"] <= second["granted"], (first, second)
    # Something was paused for a window, or the test proves nothing.
    assert digest["pauses"], digest
    origin = digest["origin_monotonic"]
    calls: dict[str, list[tuple[float, float]]] = {}
    for operator in KNOWN:
        text = (tmp_path / "logs" / f"{operator}.log").read_text()
        calls[operator] = [
            (float(a) - origin, float(b) - origin) for a, b in CALL_LINE.findall(text)
        ]
        assert calls[operator], f"no call of {operator} was logged"
    for window in windows:
        for operator, spans in calls.items():
            if operator == window["operator"]:
                continue
            inside = [s for s in spans if s[0] < window["released"] and s[1] > window["granted"]]
            assert not inside, (
                f"{operator} ran {inside} during {window['operator']}'s window {window}"
            )


def test_a_child_dying_mid_check_loses_only_its_operator(tiny_suite, tmp_path):
    results = run(EXPLOITS / "exits", tiny_suite, tmp_path, concurrency=2, shape_timeout_s=60)
    by_operator = {e["operator"]: e for e in results["operators"]}
    silu = by_operator["silu_and_mul"]
    assert silu["status"] == "runtime_error" and "exited with code 0" in silu["error"]
    assert [s["status"] for s in by_operator["rms_norm"]["shapes"]] == ["runtime_error"]
    honest = by_operator["fused_add_rms_norm"]
    assert [s["status"] for s in honest["shapes"]] == ["pass"] and honest["score"] > 0
    assert [e["operator"] for e in results["operators"]] == list(KNOWN)


def test_a_kernel_that_switches_when_unwatched_is_still_caught_beside_others(
    tiny_suite, tmp_path, make_bundle
):
    files = {f"{op}.py": (TRITON_BASELINE / f"{op}.py").read_text() for op in KNOWN}
    files["rms_norm.py"] = (EXPLOITS / "watched_switch" / "rms_norm.py").read_text()
    results = run(make_bundle(files), tiny_suite, tmp_path, concurrency=2)
    by_operator = {e["operator"]: e for e in results["operators"]}
    (shape,) = by_operator["rms_norm"]["shapes"]
    assert shape["status"] == "fallback" and "unwatched_path" in shape["codes"]
    assert "another path" in shape["error"]
    assert by_operator["rms_norm"]["score"] == 0
    for operator in ("silu_and_mul", "fused_add_rms_norm"):
        assert [s["status"] for s in by_operator[operator]["shapes"]] == ["pass"]


def test_too_few_sandbox_users_is_a_clear_error(tiny_suite, tmp_path):
    policy = SandboxPolicy(user="65534", second_user="65533", third_user="65532")
    with pytest.raises(SandboxError, match="ATREX_SANDBOX_MORE_USERS") as caught:
        run(
            TRITON_BASELINE, tiny_suite, tmp_path, concurrency=5, sandbox_policy=policy,
            start_ahead=False,
        )  # fmt: skip
    assert "--concurrency 5 needs 5 sandbox users" in str(caught.value)
    assert "this worker has 3" in str(caught.value)
    more = SandboxPolicy.from_environment(
        {"ATREX_SANDBOX_USER": "65534", "ATREX_SANDBOX_MORE_USERS": "65531, 65530"}
    )
    assert more.more_users == ("65531", "65530")
    sandbox = Sandbox(policy=more, scratch=tmp_path, privileged=True)
    assert sandbox.users == 5 and sandbox.more == [(65531, 65531), (65530, 65530)]
    twice = SandboxPolicy(user="65534", more_users=("65533",))
    with pytest.raises(SandboxError, match="twice"):
        Sandbox(policy=replace(twice, mode="required"), scratch=tmp_path, privileged=True)


# --------------------------------------------------------------------------- the re-watch


class _Gate:
    """A timing window that says other children ran beside the shape's checks."""

    def __init__(self, shared: bool) -> None:
        self.shared = shared
        self.held: list[str] = []
        self.safe_points = 0
        self.released = 0

    def safe_point(self) -> None:
        self.safe_points += 1

    def release(self) -> None:
        self.released += 1

    @contextmanager
    def window(self, shape_id: str, purpose: str = "timing") -> Iterator[bool]:
        self.held.append(shape_id if purpose == "timing" else f"{shape_id} ({purpose})")
        yield self.shared


@pytest.fixture
def evaluate_rms_norm(monkeypatch) -> Iterator[Callable[..., dict[str, Any]]]:
    """``evaluate_rms_norm(bundle, gate=None, slow_first=0)``: the child's record of one
    small rms_norm shape of ``bundle`` in this process; the candidate's first
    ``slow_first`` calls (the watched correctness trials) run its kernel ``REPEATS`` times,
    as slow as calls slowed by other children could be, its own kernels all the same."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    prepare_monitoring(__import__("torch").device("cpu"))
    imported: list[str] = []

    def run_one(
        bundle: Path, *, gate: Any = None, slow_first: int = 0, model: Any = None
    ) -> dict[str, Any]:
        module = import_candidate(bundle / "rms_norm.py", "rms_norm", bundle)
        imported.append(module.__name__)
        calls = [0]

        class Slowed(module.Model):  # type: ignore[name-defined,misc]
            def forward(self, *args: Any, **kwargs: Any) -> Any:
                calls[0] += 1
                for _ in range(REPEATS - 1 if calls[0] <= slow_first else 0):
                    super().forward(*args, **kwargs)  # its own kernel, only slower
                return super().forward(*args, **kwargs)

        job = {
            "operator": "rms_norm", "device": "cpu", "seed": SEED, "time_budget_s": 0.01,
            "bundle_dir": str(bundle), "threshold_own_share": 0.8,
        }  # fmt: skip
        shape = {
            "shape_id": "0", "init_kwargs": {"eps": 1e-6},
            "input_kwargs": {"token_count": 3, "hidden_size": 200},
            "q_read": 3 * 200 * 2 + 200 * 2, "q_write": 3 * 200 * 2,
        }  # fmt: skip
        return evaluate_shape(job=job, shape=shape, model_class=model or Slowed, gate=gate)

    yield run_one
    for name in imported:
        sys.modules.pop(name, None)


def test_watched_calls_slowed_beside_others_are_watched_again_alone(evaluate_rms_norm, tmp_path):
    bundle = tmp_path / "honest"
    shutil.copytree(TRITON_BASELINE, bundle)
    # Alone, calls that slow make the check fire: the figure is what it is.
    alone = evaluate_rms_norm(bundle, slow_first=TRIALS)
    assert alone["status"] == "pass" and alone["unwatched_error"], alone
    assert "watch_confirmed" not in alone
    gate = _Gate(shared=True)
    shared = evaluate_rms_norm(bundle, gate=gate, slow_first=TRIALS)
    assert gate.held == ["0"]
    assert shared["unwatched_error"] is None, shared
    confirmed = shared["watch_confirmed"]
    assert confirmed["confirmed"] is False
    assert confirmed["shared_watched_time_s"] > 5 * confirmed["watched_time_s"]
    assert shared["watched_time_s"] == confirmed["watched_time_s"]
    # Not shared: nothing is measured again, whatever fired.
    lone = evaluate_rms_norm(bundle, gate=_Gate(shared=False), slow_first=TRIALS)
    assert lone["unwatched_error"] and "watch_confirmed" not in lone


def test_a_shapes_checks_pause_at_each_trial_and_before_each_reference(evaluate_rms_norm):
    gate = _Gate(shared=False)
    record = evaluate_rms_norm(TRITON_BASELINE, gate=gate)
    assert record["status"] == "pass" and record["trials"] == TRIALS
    # Before trials 2..n, and before each trial's reference call.
    assert gate.safe_points == 2 * TRIALS - 1
    assert gate.held == ["0"]


def test_out_of_memory_beside_others_is_evaluated_again_alone(evaluate_rms_norm):
    import torch

    module = import_candidate(TRITON_BASELINE / "rms_norm.py", "rms_norm", TRITON_BASELINE)
    failures = [0]

    class OutOfMemoryOnce(module.Model):  # type: ignore[name-defined,misc]
        def forward(self, *args: Any, **kwargs: Any) -> Any:
            if failures[0] == 0:
                failures[0] += 1
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 256 MiB.")
            return super().forward(*args, **kwargs)

    gate = _Gate(shared=True)
    record = evaluate_rms_norm(TRITON_BASELINE, gate=gate, model=OutOfMemoryOnce)
    assert record["status"] == "pass", record
    assert "Tried to allocate 256 MiB" in record["alone_after"]["error"]
    # The second attempt held a window of its own and timed inside it, not in another,
    # after the cached memory was handed back.
    assert gate.held == ["0 (alone)"] and gate.released == 1
    # Alone (one operator at a time), out of memory is the shape's failure.
    failures[0] = 0
    alone = evaluate_rms_norm(TRITON_BASELINE, model=OutOfMemoryOnce)
    assert alone["status"] == "runtime_error" and alone["codes"] == ["out_of_memory"]
    assert "alone_after" not in alone

    class AlwaysOutOfMemory(module.Model):  # type: ignore[name-defined,misc]
        def forward(self, *args: Any, **kwargs: Any) -> Any:
            raise torch.OutOfMemoryError("CUDA out of memory.")

    # Out of memory alone as well: the second record, the first error kept beside it.
    twice = evaluate_rms_norm(TRITON_BASELINE, gate=_Gate(shared=True), model=AlwaysOutOfMemory)
    assert twice["codes"] == ["out_of_memory"] and "alone_after" in twice
    sys.modules.pop(module.__name__, None)


def test_a_switch_when_unwatched_is_confirmed_when_watched_again(evaluate_rms_norm):
    bundle = EXPLOITS / "watched_switch"
    record = evaluate_rms_norm(bundle, gate=_Gate(shared=True))
    assert record["unwatched_error"] and "another path" in record["unwatched_error"]
    assert record["watch_confirmed"]["confirmed"] is True


# --------------------------------------------------------------------------- the protocol


def _controls(read_fd: int) -> list[str]:
    """The control frames waiting on a child's end of its job pipe."""
    import os
    import select

    from evaluator.frames import FrameReader

    reader, frames = FrameReader(), []
    while select.select([read_fd], [], [], 0)[0]:
        frames += reader.feed(os.read(read_fd, 4096))
    return [f["control"] for f in frames]


def test_the_window_pauses_the_others_grants_and_resumes_in_that_order():
    import os

    from evaluator.concurrency import TimingWindow

    window = TimingWindow()
    pipes = {name: os.pipe() for name in ("a", "b")}
    hooks = {name: window.attach(name, pipes[name][1], job := {}) for name in pipes}
    assert job == {"timing_window": True}
    for name in pipes:
        hooks[name]["on_event"]({"event": "hello"})
        assert _controls(pipes[name][0]) == ["resume"]
    hooks["a"]["on_event"]({"event": "timing_request", "shape_id": "0", "since": 0.0})
    # b runs: a waits (idle, so its silence is no timeout) and b is asked to pause.
    assert _controls(pipes["a"][0]) == [] and _controls(pipes["b"][0]) == ["pause"]
    assert hooks["a"]["slot"].idle() and not hooks["b"]["slot"].idle()
    assert hooks["b"]["slot"].overdue(0.0) is not None  # asked, not yet paused
    hooks["b"]["on_event"]({"event": "paused"})
    assert _controls(pipes["a"][0]) == ["grant"] and hooks["b"]["slot"].idle()
    assert hooks["b"]["slot"].overdue(0.0) is None
    hooks["a"]["on_event"]({"event": "timing_done", "shape_id": "0"})
    assert _controls(pipes["b"][0]) == ["resume"]
    (held,) = window.windows
    assert held["operator"] == "a" and held["shared"] is True  # b ran since a's checks began
    assert held["granted"] <= held["released"]
    (pause,) = window.pauses
    assert pause["operator"] == "b" and pause["paused"] <= held["granted"] <= pause["resumed"]
    # A child that has read its job while the window is held waits for it to be free.
    # Then b's turn: a (running again) is paused first.
    hooks["b"]["on_event"]({"event": "timing_request", "shape_id": "0", "since": 1e12})
    assert _controls(pipes["b"][0]) == [] and _controls(pipes["a"][0]) == ["pause"]
    hooks["a"]["on_event"]({"event": "paused"})
    assert _controls(pipes["b"][0]) == ["grant"] and window.windows[-1]["shared"] is False
    c_read, c_write = os.pipe()
    c = window.attach("c", c_write, {})
    c["on_event"]({"event": "hello"})
    assert _controls(c_read) == [] and c["slot"].idle()
    window.detach("b")  # gone in its window: released, and the others go on
    assert _controls(c_read) == ["resume"] and _controls(pipes["a"][0]) == ["resume"]
    assert window.windows[-1]["released"] is not None
    for name in ("a", "c"):
        window.detach(name)
    for fd in (c_read, c_write, *(fd for pair in pipes.values() for fd in pair)):
        os.close(fd)


def test_the_gate_pauses_at_safe_points_and_releases_cached_memory():
    import os
    import time

    from evaluator.concurrency import TimingGate, TimingWindow
    from evaluator.frames import write_frame

    read_fd, write_fd = os.pipe()
    sent: list[dict[str, Any]] = []
    calls = {"sync": 0, "release": 0}
    gate = TimingGate(
        read_fd,
        sent.append,
        lambda: calls.__setitem__("sync", calls["sync"] + 1),
        lambda: calls.__setitem__("release", calls["release"] + 1),
    )
    gate.checkpoint()  # a shape starts: nothing asked, the cache released all the same
    assert calls == {"sync": 0, "release": 1} and sent == []
    since = gate._since
    time.sleep(0.01)
    write_frame(write_fd, {"control": "pause"})
    write_frame(write_fd, {"control": "resume"})
    gate.safe_point()  # inside the shape: paused (the device idle, its cache released)
    assert sent == [{"event": "paused"}] and calls == {"sync": 1, "release": 2}
    assert gate._since == since  # the shape's checks are still counted from their start
    write_frame(write_fd, {"control": "grant", "shared": False})
    with gate.window("7", purpose="alone") as shared:
        assert shared is False
    request = {"event": "timing_request", "shape_id": "7", "purpose": "alone", "since": since}
    assert sent[1] == request
    assert sent[2] == {"event": "timing_done", "shape_id": "7"}
    os.close(read_fd)
    os.close(write_fd)
    # The runner's digest names a window held for something other than timing.
    window = TimingWindow()
    pipe = os.pipe()
    hook = window.attach("a", pipe[1], {})
    hook["on_event"]({"event": "hello"})
    hook["on_event"]({**sent[1]})
    hook["on_event"]({"event": "timing_done", "shape_id": "7"})
    hook["on_event"]({"event": "timing_request", "shape_id": "8", "since": since})
    first, second = window.windows
    assert first["purpose"] == "alone" and "purpose" not in second
    window.detach("a")
    for fd in pipe:
        os.close(fd)
