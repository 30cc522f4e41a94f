"""Evaluate a bundle: one fresh child process per operator, scores, results.json.

The runner process itself imports neither torch nor the candidate's code. For each
operator it starts ``python -m evaluator.child`` inside the OS sandbox
(``evaluator.sandbox``: no network, hidden site files, an unprivileged user, limits)
with two pipes it created (the job in, per-shape records out; see ``evaluator.child``),
sends the child's stdout and stderr to a log file, enforces a wall-time limit between
records and a memory limit, and turns the records into the shape entries of
results.json as they arrive (so progress is live). On CUDA the next operator's child is
started while one measures, so that its harness start-up is hidden (``ChildStarter``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import secrets
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from evaluator import sanitizer as memory_sanitizer
from evaluator.bundle import BundleManifest, extract_bundle
from evaluator.environment import collect_environment, gpu_clocks
from evaluator.errors import BundleError
from evaluator.frames import WARM_UP_FAILED, FrameReader, write_frame
from evaluator.hardware import HardwareProfile, get_profile
from evaluator.results import operator_entry, results_document, shape_entry, write_results
from evaluator.sandbox import (
    ChildSandbox,
    Sandbox,
    SandboxError,
    SandboxPolicy,
    descendants,
    foreign_processes,
    kill_tree,
    tree_rss_bytes,
)
from evaluator.scoring import operator_score, summarize
from evaluator.suite import ShapeSpec, Suite, load_suite
from evaluator.upstream import load_suite_with_sources
from evaluator.verdicts import merge

DEFAULT_HARDWARE = {"cpu": "cpu-dev", "cuda": "h200-sxm"}
DEFAULT_SHAPE_SET = {"cpu": "smoke", "cuda": "full"}
DEFAULT_SHAPE_TIMEOUT_S = 300.0
"""Longest silence allowed from a child: importing the candidate, or one whole shape."""
CATALOGUE_SUITE = "atrex-bench-v1"
"""Every operator name the portal knows, for telling a typo from another suite's operator."""
_READ_CHUNK = 1 << 16
MEMORY_CHECK_INTERVAL_S = 0.5
FORGED_RECORD_ERROR = (
    "tampering: something other than the harness wrote to the result pipe (a forged or "
    "corrupted record: {detail}); every shape of this operator fails"
)


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


class ProgressWriter:
    """Appends one JSON line per event to the progress file (flushed), if there is one."""

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self.path = Path(path) if path else None

    def emit(self, event: str, **fields: Any) -> None:
        """Write ``{"event": event, **fields}`` as one line."""
        if self.path is None:
            return
        line = json.dumps({"event": event, **fields}, allow_nan=False)
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")
            handle.flush()


@dataclass
class ChildOutcome:
    """What one operator's child process produced."""

    status: str = "ok"  # ok | compile_error | runtime_error | timeout
    error: str | None = None
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    unfinished_status: str = "runtime_error"
    unfinished_error: str | None = None
    unfinished_code: str = "crashed"
    """The verdict code (``evaluator.verdicts``) of the shapes the child never reported."""
    tampered: bool = False
    """The candidate tampered with the harness or its pipe: every shape fails."""
    variants: list[dict[str, Any]] = field(default_factory=list)
    """The validation variants' records: name, status and error only."""
    marks: dict[str, float] = field(default_factory=dict)
    """Seconds after its job was sent at which the child said hello, was ready, imported
    the candidate, started a shape and was done, and when it was gone (see ``phases``)."""
    ahead_s: float = 0.0
    """How long the child had been up (warming its harness) before its job was sent."""

    def mark(self, name: str, at: float) -> None:
        self.marks.setdefault(name, round(at, 3))

    def phases(self) -> dict[str, float]:
        """Where the child's wall time from its job to its exit went: ``start`` (what was
        left of its start-up when the job came: sandbox, interpreter, torch, the device,
        the profiler), ``harness`` (the operator's reference, the integrity snapshot),
        ``import`` (the candidate's import), ``variants`` (hidden validation variants),
        ``shapes``, ``exit`` (tear-down); a phase the child never reached is left out."""
        # Each mark ends the phase named beside it (the launch is at 0).
        names = {"hello": "start", "ready": "harness", "imported": "import",
                 "shape_start": "variants", "done": "shapes", "gone": "exit"}  # fmt: skip
        phases: dict[str, float] = {}
        previous = 0.0
        for mark in names:
            if mark in self.marks:
                phases[names[mark]] = round(max(0.0, self.marks[mark] - previous), 3)
                previous = self.marks[mark]
        return phases

    def tampering(self, error: str, code: str = "tampering") -> None:
        """Record tampering: the operator and all its shapes fail with ``error``."""
        self.tampered = True
        self.status = "runtime_error"
        self.error = self.unfinished_error = error
        self.unfinished_status = "runtime_error"
        self.unfinished_code = code

    def fail(self, status: str, error: str, code: str) -> None:
        """The child stopped (or was stopped) with ``error``: the operator's status, and
        that of every shape it did not report, with its verdict code."""
        self.status = self.unfinished_status = status
        self.error = self.unfinished_error = error
        self.unfinished_code = code


def known_operator_names(suite: Suite) -> set[str]:
    """The suite's operators plus the portal catalogue's (if it can be loaded)."""
    names = set(suite.operator_slugs())
    try:
        names.update(load_suite(CATALOGUE_SUITE).operator_slugs())
    except Exception:  # the catalogue is a convenience for messages, never required
        pass
    return names


def _kill(process: subprocess.Popen[bytes], uid: int | None = None) -> None:
    """Stop the child and anything it started (it leads its own session)."""
    kill_tree(process.pid, uid)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()


_SIGNAL_REASONS = {
    "SIGXCPU": "was stopped at its CPU time limit ({cpu} s of CPU time)",
    "SIGXFSZ": "was stopped for writing a file larger than the limit ({file_mib} MiB)",
    "SIGSEGV": "crashed with a segmentation fault (SIGSEGV: invalid memory access)",
    "SIGBUS": "crashed with a bus error (SIGBUS: invalid memory access)",
    "SIGILL": "crashed on an illegal instruction (SIGILL)",
    "SIGFPE": "crashed on an arithmetic fault (SIGFPE)",
    "SIGABRT": "aborted (SIGABRT)",
}


def _exit_description(returncode: int | None, policy: SandboxPolicy | None = None) -> str:
    if returncode is None:
        return "did not exit"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            return f"was killed by signal {-returncode}"
        if name in _SIGNAL_REASONS:
            policy = policy or SandboxPolicy()
            return _SIGNAL_REASONS[name].format(
                cpu=policy.cpu_time_s, file_mib=policy.max_file_bytes // (1024 * 1024)
            )
        if name == "SIGKILL" and policy is not None:
            return (
                f"was killed (SIGKILL; at its CPU time limit of {policy.cpu_time_s} s, or by "
                "the system)"
            )
        return f"was killed by signal {name}"
    return f"exited with code {returncode}"


@dataclass
class StartedChild:
    """An operator's child, started (its harness warming up) and waiting for its job."""

    operator: str
    process: subprocess.Popen[bytes]
    plan: ChildSandbox
    job_write: int
    result_read: int
    launched: float

    def stop(self) -> None:
        """Kill it and everything it started; close its pipes (it never got its job)."""
        _kill(self.process, self.plan.uid)
        for fd in (self.job_write, self.result_read):
            try:
                os.close(fd)
            except OSError:
                pass


def start_child(
    *,
    operator: str,
    bundle_dir: Path | None,
    device: str,
    log_path: Path,
    sandbox: Sandbox,
    second_user: bool = False,
    wrapper: list[str] | None = None,
    extra_env: Mapping[str, str] | None = None,
    writable: tuple[Path, ...] = (),
) -> StartedChild:
    """Start ``python -m evaluator.child`` for ``operator`` in its sandbox: it warms up the
    harness (torch, the device, the profiler; nothing of the candidate's) and then waits
    for its job, which ``run_started_child`` sends. Raises SandboxError when the policy
    requires a protection that cannot be applied. ``wrapper`` goes before the child's
    command (``compute-sanitizer ...``, see ``evaluator.sanitizer``), ``extra_env`` into
    its environment; ``writable`` are folders of its own it may write (``Sandbox.child``)."""
    job_read, job_write = os.pipe()
    result_read, result_write = os.pipe()
    command = [
        *(wrapper or []),
        sys.executable,
        "-P",
        "-m",
        "evaluator.child",
        "--job-fd",
        str(job_read),
        "--result-fd",
        str(result_write),
        "--device",
        device,
    ]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    launched = time.monotonic()
    try:
        plan = sandbox.child(operator, bundle_dir, second=second_user, writable=writable)
        env = (
            {"env": {**sandbox.environment(plan, sandbox.device), **extra_env}} if extra_env else {}
        )
        with open(log_path, "ab") as log:
            process, _ = sandbox.launch(
                command,
                plan,
                pass_fds=(job_read, result_write),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                **env,
            )
    except BaseException:
        os.close(job_write)
        os.close(result_read)
        raise
    finally:
        os.close(job_read)
        os.close(result_write)
    return StartedChild(operator, process, plan, job_write, result_read, launched)


def run_started_child(
    child: StartedChild,
    *,
    job: dict[str, Any],
    shape_timeout_s: float,
    on_record: Callable[[dict[str, Any]], None],
    on_sent: Callable[[], None] | None = None,
    watch_processes: bool = True,
) -> ChildOutcome:
    """Hand the started child its job and follow it to completion (or one of its limits);
    ``on_sent`` is called once the job is sent (to start the next child ahead).

    The job carries a fresh key; every record the child sends back must be signed with
    it (see ``evaluator.child``), and any other bytes on the pipe fail the operator.
    Everything the child started is killed when it ends. The outcome's marks count from
    the moment the job was sent; ``ahead_s`` is how long the child had been up before.
    """
    outcome = ChildOutcome()
    key = secrets.token_bytes(32)
    job = {**job, "auth_key": key.hex()}
    sent = time.monotonic()
    outcome.ahead_s = round(sent - child.launched, 3)
    process, uid = child.process, child.plan.uid
    try:
        try:
            write_frame(child.job_write, job)
        except BrokenPipeError:
            pass  # the child died; its exit status tells the rest
        finally:
            os.close(child.job_write)
        if on_sent is not None:
            on_sent()
        _follow(
            process, child.result_read, outcome, shape_timeout_s, on_record,
            key=key, sandbox=child.plan, launched=sent, watch_processes=watch_processes,
        )  # fmt: skip
    finally:
        os.close(child.result_read)
        # The child is done (or stopped): nothing it started may outlive it.
        _kill(process, uid)
        outcome.mark("gone", time.monotonic() - sent)
    if process.returncode == WARM_UP_FAILED and "hello" not in outcome.marks:
        # Exited before its job was read: no candidate code ran, the harness failed.
        outcome.fail(
            "runtime_error",
            "the evaluation harness could not start (torch, the device or the profiler); "
            "see the operator's log",
            "harness_error",
        )
    return outcome


class ChildStarter:
    """Starts each operator's child, the next one ahead of its turn where it may.

    While one child measures, the next operator's child is started (as the second sandbox
    user, see ``Sandbox.can_overlap``) and warms up its harness, so its turn begins with
    torch, the device and the profiler ready; it gets its job (and so runs candidate
    code) only at its turn. A child started ahead that died before its turn (the
    previous candidate took all GPU memory, say) is replaced by a fresh one. Use as a
    context manager: a child never taken is stopped at the end.
    """

    def __init__(
        self, *, sandbox: Sandbox, device: str, bundle_dir: Path, log_dir: Path,
        ahead: bool = True, tool: str | None = None, sanitizer: str | None = None,
    ) -> None:  # fmt: skip
        self.sandbox = sandbox
        self.device = device
        self.bundle_dir = bundle_dir
        self.log_dir = log_dir
        # A sanitizer tool: every child runs under ``compute-sanitizer`` (evaluator.sanitizer)
        # and logs to ``<operator>.sanitizer-<tool>.log``.
        self.tool = tool
        self.wrapper = memory_sanitizer.command(sanitizer, tool) if tool and sanitizer else None
        self.ahead = ahead and sandbox.can_overlap
        self._next: StartedChild | None = None
        self._second = True  # the user of the child started last (the first is not)

    def __enter__(self) -> ChildStarter:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._next is not None:
            self._next.stop()
            self._next = None

    def _start(self, operator: str) -> StartedChild:
        # Two children are alive at once only when started one after the other: turn
        # and turn about, they run as different users.
        if self.ahead:
            self._second = not self._second
        return start_child(
            operator=operator,
            bundle_dir=self.bundle_dir,
            device=self.device,
            log_path=self.log_path(operator),
            sandbox=self.sandbox,
            second_user=self.ahead and self._second,
            wrapper=self.wrapper,
            extra_env=memory_sanitizer.SANITIZER_ENV if self.wrapper else None,
        )

    def log_path(self, operator: str) -> Path:
        """The log of ``operator``'s child (the sanitizer's reports with it, under one)."""
        name = f"{operator}.sanitizer-{self.tool}.log" if self.tool else f"{operator}.log"
        return self.log_dir / name

    def take(self, operator: str) -> StartedChild:
        """The child for ``operator``: the one started ahead if it is still alive, else a
        new one."""
        ready, self._next = self._next, None
        if ready is not None and ready.operator == operator and ready.process.poll() is None:
            return ready
        if ready is not None:
            ready.stop()
        return self._start(operator)

    def start_ahead(self, operator: str | None) -> None:
        """Start ``operator``'s child now, for its turn after the running one."""
        if not self.ahead or operator is None or self._next is not None:
            return
        try:
            self._next = self._start(operator)
        except SandboxError:
            self._next = None  # raised again, at its turn, by take()


class RoundChildren(Protocol):
    """The sandbox and children of an agent campaign's rounds (``evaluator.serve``), for
    ``run_bundle(rounds=...)``: one operator a round, each in a fresh child started ahead."""

    sandbox: Sandbox
    sandbox_report: dict[str, Any]
    """What the sandbox probe found once, for every round's environment digest."""

    def prepare(self, operators: list[str]) -> Path:
        """The (empty) bundle folder of the child that will run this round."""
        ...

    def starter(self, log_dir: Path) -> ChildStarter:
        """The round's starter; its children log under ``log_dir``."""
        ...

    def finish(self) -> None:
        """The round is over (its child is gone): clean up after it."""
        ...


def _memory_exceeded(
    process: subprocess.Popen[bytes], sandbox: ChildSandbox | None, pids: list[int]
) -> str | None:
    """A message when the child's processes (``pids``) together hold more memory than
    allowed."""
    if sandbox is None or not sandbox.policy.memory_bytes:
        return None
    used = tree_rss_bytes(process.pid, sandbox.uid, pids=pids)
    if used <= sandbox.policy.memory_bytes:
        return None
    return (
        f"the evaluation process used {used / 2**30:.1f} GiB of host memory, over the "
        f"limit of {sandbox.policy.memory_bytes / 2**30:.1f} GiB, and was stopped"
    )


OWN_PROCESS_ERROR = (
    "tampering: the submission started a process of its own ({found}); work in another "
    "process escapes the profiler's attribution and the fallback check, so it cannot be "
    "scored: compute in the evaluation process, in your own kernels"
)


def _own_processes(
    process: subprocess.Popen[bytes], sandbox: ChildSandbox | None, pids: list[int]
) -> str | None:
    """A message when the child has processes below it (``pids``) that no compiler
    explains."""
    found = foreign_processes(
        process.pid,
        sandbox.uid if sandbox is not None else None,
        writable=[sandbox.private_tmp, *sandbox.writable] if sandbox is not None else [],
        pids=pids,
    )
    return OWN_PROCESS_ERROR.format(found="; ".join(found[:3])) if found else None


def _follow(
    process: subprocess.Popen[bytes],
    fd: int,
    outcome: ChildOutcome,
    shape_timeout_s: float,
    on_record: Callable[[dict[str, Any]], None],
    *,
    key: bytes | None = None,
    sandbox: ChildSandbox | None = None,
    launched: float,
    watch_processes: bool = True,
) -> None:
    reader = FrameReader(key=key)
    uid = sandbox.uid if sandbox is not None else None
    next_memory_check = 0.0
    deadline = time.monotonic() + shape_timeout_s
    current: str | None = None  # what the child is doing: "shape 3", "validation variant 'x'"
    finished = False
    while True:
        left = deadline - time.monotonic()
        over_memory = own_process = None
        if time.monotonic() >= next_memory_check:
            next_memory_check = time.monotonic() + MEMORY_CHECK_INTERVAL_S
            tree = descendants(process.pid, uid)  # one walk of /proc serves both watches
            over_memory = _memory_exceeded(process, sandbox, tree)
            # Under a wrapper (the sanitizer) the child itself is a process below the one
            # started; its own attempts to start processes are still refused by its audit hook.
            own_process = _own_processes(process, sandbox, tree) if watch_processes else None
        if own_process:
            _kill(process, uid)
            outcome.tampering(own_process, "own_process")
            return
        if over_memory:
            _kill(process, uid)
            outcome.fail("runtime_error", over_memory, "out_of_memory")
            return
        if left <= 0:
            _kill(process, uid)
            where = current or (
                "starting the evaluation harness"
                if "hello" not in outcome.marks
                else "importing the candidate"
            )
            outcome.fail(
                "timeout",
                f"no progress for {shape_timeout_s:.0f} s while {where}; "
                "the evaluation process was stopped",
                "timeout",
            )
            return
        ready, _, _ = select.select([fd], [], [], min(left, MEMORY_CHECK_INTERVAL_S))
        if not ready:
            if process.poll() is not None:
                # The child is gone and nothing more is waiting: processes it left behind
                # may still hold the pipe open, so do not wait for end-of-file.
                break
            continue
        data = os.read(fd, _READ_CHUNK)
        if not data:
            break
        try:
            messages = reader.feed(data)
        except (ValueError, UnicodeDecodeError) as exc:
            # The harness writes well-formed signed frames only: these bytes came from
            # the candidate, which shares the process.
            _kill(process, uid)
            outcome.tampering(FORGED_RECORD_ERROR.format(detail=exc))
            return
        for message in messages:
            now = time.monotonic()
            deadline = now + shape_timeout_s
            event = message.get("event")
            if event in ("hello", "ready", "imported", "shape_start", "done"):
                outcome.mark(str(event), now - launched)
            if event == "shape_start":
                current = f"shape {message.get('shape_id')}"
            elif event == "variant_start":
                current = f"validation variant {str(message.get('name'))!r}"
            elif event == "variant" and isinstance(message.get("result"), dict):
                record = message["result"]
                outcome.variants.append(
                    {key: record.get(key) for key in ("name", "status", "error", "codes")}
                )
                current = None
            elif event == "shape" and isinstance(message.get("result"), dict):
                record = message["result"]
                outcome.records[str(record.get("shape_id"))] = record
                on_record(record)
                current = None
            elif event == "tampering":
                outcome.tampering(str(message.get("error")))
                finished = True
            elif event in ("compile_error", "harness_error"):
                error = str(message.get("error"))
                if message.get("traceback"):
                    error += "\n" + str(message["traceback"])
                outcome.fail(
                    "compile_error" if event == "compile_error" else "runtime_error",
                    error,
                    str(event),
                )
                finished = True
            elif event == "done":
                finished = True
        if finished:
            break  # the child's last word: what follows (e.g. from its forks) is ignored
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        _kill(process, uid)
    if reader.buffer:
        outcome.tampering(
            FORGED_RECORD_ERROR.format(detail=f"{len(reader.buffer)} bytes left unframed")
        )
    elif not finished:
        where = f" during {current}" if current else ""
        code = process.returncode
        hint = (
            " (the candidate may have called os._exit or sys.exit from a thread)"
            if code is not None and code >= 0
            else ""
        )
        outcome.fail(
            "runtime_error",
            f"the evaluation process "
            f"{_exit_description(code, sandbox.policy if sandbox else None)}{where} before it "
            f"reported{hint}; see the operator's log",
            "crashed",
        )


def _job(
    *,
    operator: str,
    manifest: BundleManifest,
    bundle_dir: Path,
    shapes: list[ShapeSpec],
    device: str,
    seed: int,
    time_budget_s: float | None,
    threshold_own_share: float,
    operator_source: Mapping[str, Any] | None = None,
    validation_variants: bool = True,
) -> dict[str, Any]:
    job: dict[str, Any] = {
        "operator": operator,
        "bundle_dir": str(bundle_dir),
        "module_path": manifest.operators[operator],
        "device": device,
        "seed": seed,
        "time_budget_s": time_budget_s,
        # A correct shape under it is a fallback, scored 0: the child does not time it.
        "threshold_own_share": threshold_own_share,
        "validation_variants": validation_variants,
        "shapes": [
            {
                "shape_id": s.shape_id,
                "init_kwargs": s.init_kwargs,
                "input_kwargs": s.input_kwargs,
                "q_read": s.q_read,
                "q_write": s.q_write,
            }
            for s in shapes
        ],
    }
    if operator_source is not None:
        # An operator the evaluator does not implement: the child loads it from these.
        job["operator_source"] = dict(operator_source)
    return job


@dataclass
class RunState:
    """Per-run state: where we are, for progress lines."""

    progress: ProgressWriter
    shapes_total: int
    shapes_done: int = 0

    def shape_done(self, operator: str, entry: Mapping[str, Any]) -> None:
        """Count a finished shape and emit its progress line."""
        self.shapes_done += 1
        self.progress.emit(
            "shape",
            operator=operator,
            shape_id=entry["shape_id"],
            status=entry["status"],
            shapes_done=self.shapes_done,
            shapes_total=self.shapes_total,
        )


def _evaluate_operator(
    *,
    operator: str,
    suite: Suite,
    shapes: list[ShapeSpec],
    manifest: BundleManifest,
    bundle_dir: Path,
    starter: ChildStarter,
    next_operator: str | None,
    hardware: HardwareProfile,
    device: str,
    seed: int,
    time_budget_s: float | None,
    shape_timeout_s: float,
    state: RunState,
    operator_source: Mapping[str, Any] | None = None,
    validation_variants: bool = True,
) -> dict[str, Any]:
    """Evaluate one operator in its child (``next_operator``'s child, if any, is started
    as soon as this one has its job) and return its entry of results.json."""
    threshold = suite.threshold_own_share
    by_id = {shape.shape_id: shape for shape in shapes}
    entries: dict[str, dict[str, Any]] = {}
    warnings: list[str] = []
    variants: list[dict[str, Any]] = []
    child_wall_s: float | None = None
    child_phases: dict[str, float] = {}
    ahead_s: float | None = None

    def finish(shape: ShapeSpec, **kwargs: Any) -> None:
        entry = shape_entry(shape, hardware=hardware, threshold_own_share=threshold, **kwargs)
        entries[shape.shape_id] = entry
        state.shape_done(operator, entry)

    if operator not in manifest.operators:
        status, error = "missing", f"the bundle has no {operator}.py"
        for shape in shapes:
            finish(shape, status="missing", error=error, codes=["missing"])
    elif operator in manifest.problems:
        status = "compile_error"
        error = f"[{manifest.problems[operator]['code']}] {manifest.problems[operator]['message']}"
        for shape in shapes:
            finish(shape, status="compile_error", error=error, codes=["compile_error"])
    else:

        def on_record(record: dict[str, Any]) -> None:
            shape = by_id.get(str(record.get("shape_id")))
            if shape is None or shape.shape_id in entries:
                return
            for warning in record.get("warnings") or []:
                if warning not in warnings:
                    warnings.append(warning)
            finish(shape, status=str(record.get("status")), measurement=record)

        job = _job(
            operator=operator,
            manifest=manifest,
            bundle_dir=bundle_dir,
            shapes=shapes,
            device=device,
            seed=seed,
            time_budget_s=time_budget_s,
            threshold_own_share=threshold,
            operator_source=operator_source,
            validation_variants=validation_variants,
        )
        outcome = run_started_child(
            starter.take(operator),
            job=job,
            shape_timeout_s=shape_timeout_s,
            on_record=on_record,
            on_sent=lambda: starter.start_ahead(next_operator),
        )
        child_wall_s = outcome.marks.get("gone")
        child_phases = outcome.phases()
        ahead_s = outcome.ahead_s
        status, error = outcome.status, outcome.error
        variants = outcome.variants
        if outcome.tampered:
            # Shapes already reported are failed too: the tampering may predate them.
            for shape in shapes:
                if shape.shape_id in entries:
                    entries[shape.shape_id] = shape_entry(
                        shape,
                        hardware=hardware,
                        threshold_own_share=threshold,
                        status="runtime_error",
                        error=outcome.error,
                        codes=[outcome.unfinished_code],
                    )
        for shape in shapes:
            if shape.shape_id not in entries:
                finish(
                    shape,
                    status=outcome.unfinished_status,
                    error=outcome.unfinished_error or "not evaluated",
                    codes=[outcome.unfinished_code],
                )
    ordered = [entries[shape.shape_id] for shape in shapes]
    score = operator_score(ordered)
    state.progress.emit("operator", operator=operator, status=status, score=score)
    return operator_entry(
        operator=operator,
        importance=suite.operator(operator).importance,
        status=status,
        error=error,
        score=score,
        warnings=warnings,
        shapes=ordered,
        variants=variants,
        wall_s=child_wall_s,
        phases_s=child_phases,
        ahead_s=ahead_s,
    )


def _sanitize_operators(
    *,
    entries: list[dict[str, Any]],
    jobs: Mapping[str, dict[str, Any]],
    smallest: Mapping[str, ShapeSpec],
    tools: tuple[str, ...],
    executable: str,
    sandbox: Sandbox,
    device: str,
    bundle_dir: Path,
    log_dir: Path,
    shape_timeout_s: float,
) -> dict[str, Any]:
    """Call each operator's smallest shape once under ``compute-sanitizer`` (one child per
    operator and tool, the next started ahead) and fail the shape, with code
    ``memory_error``, at the first error the sanitizer reports (``evaluator.sanitizer``):
    a wrong-answer code, so the operator is ``incorrect``. Only operators whose smallest
    shape passed (or fell back) are checked, and their ``jobs`` hold their child jobs.
    ``racecheck`` runs where the memcheck child found a kernel of the bundle's with shared
    memory, or could not tell. Returns what ran, for the environment digest: per tool the
    operators checked, the seconds it took and the operators it failed."""
    by_operator = {entry["operator"]: entry for entry in entries}
    pending = [op for op in jobs if op in smallest]
    shared: dict[str, bool | None] = {}
    summary: dict[str, Any] = {"executable": executable, "tools": {}}
    for tool in tools:
        if tool == "racecheck" and "memcheck" in tools:
            pending = [op for op in pending if shared.get(op, None) is not False]
        started = time.monotonic()
        failed: list[str] = []
        per_operator: dict[str, float] = {}
        with ChildStarter(
            sandbox=sandbox, device=device, bundle_dir=bundle_dir, log_dir=log_dir,
            tool=tool, sanitizer=executable,
        ) as starter:  # fmt: skip
            # Stale logs go before any child starts: the next operator's child, started
            # ahead, is already writing to its own.
            for operator in pending:
                starter.log_path(operator).unlink(missing_ok=True)
            for index, operator in enumerate(pending):
                shape = smallest[operator]
                records: list[dict[str, Any]] = []
                job = {
                    **jobs[operator],
                    "shapes": [
                        s for s in jobs[operator]["shapes"] if s["shape_id"] == shape.shape_id
                    ],
                    "sanitize": True,
                    "validation_variants": False,
                    "time_budget_s": None,
                }
                log_path = starter.log_path(operator)
                following = pending[index + 1] if index + 1 < len(pending) else None
                outcome = run_started_child(
                    starter.take(operator),
                    job=job,
                    shape_timeout_s=shape_timeout_s,
                    on_record=records.append,
                    on_sent=lambda following=following: starter.start_ahead(following),
                    watch_processes=False,
                )
                per_operator[operator] = outcome.marks.get("gone", 0.0)
                if records and tool == "memcheck":
                    shared[operator] = records[0].get("shared_memory")
                text = log_path.read_text(errors="replace") if log_path.exists() else ""
                error = memory_sanitizer.parse_report(text, tool).first_error(shape.shape_id)
                entry = by_operator[operator]
                if error is None:
                    if not records:
                        warning = (
                            f"the memory check ({tool}) of shape {shape.shape_id} did not "
                            f"complete ({outcome.error or 'no record'}); see {log_path.name}"
                        )
                        entry["warnings"].append(warning)
                    continue
                failed.append(operator)
                for shape_entry_ in entry["shapes"]:
                    if shape_entry_["shape_id"] == shape.shape_id:
                        shape_entry_.update(
                            status="incorrect",
                            error=error,
                            codes=merge(shape_entry_.get("codes"), ["memory_error"]),
                            roofline_fraction=None,
                            speedup=None,
                        )
                _rescore(entry)
        summary["tools"][tool] = {
            "operators": list(pending),
            "seconds": round(time.monotonic() - started, 3),
            "per_operator_s": per_operator,
            "failed": failed,
        }
    return summary


def _rescore(entry: dict[str, Any]) -> None:
    """An operator entry's score and verdict again, after a shape of it changed."""
    from evaluator.scoring import operator_verdict

    verdict = operator_verdict(entry["shapes"])
    entry["score"] = verdict["score"]
    for key in ("verdict", "apparent_passes", "real_passes", "wrong_shapes", "hold_codes"):
        entry[key] = verdict[key]


def _resolve_inputs(
    suite: Suite | str, hardware: HardwareProfile | str | None, device: str
) -> tuple[Suite, HardwareProfile, dict[str, dict[str, str]]]:
    if isinstance(suite, str):
        loaded, sources = load_suite_with_sources(suite)
    else:
        loaded, sources = suite, {}
    if hardware is None:
        hardware = DEFAULT_HARDWARE["cuda" if device.startswith("cuda") else "cpu"]
    profile = get_profile(hardware) if isinstance(hardware, str) else hardware
    return loaded, profile, sources


def run_bundle(
    *,
    bundle_path: str | os.PathLike[str],
    suite: Suite | str,
    hardware: HardwareProfile | str | None,
    device: str,
    operators: list[str] | None = None,
    shape_set: str | None = None,
    seed: int | None = None,
    progress_path: str | os.PathLike[str] | None = None,
    time_budget_s: float | None = None,
    log_dir: str | os.PathLike[str] | None = None,
    shape_timeout_s: float | None = None,
    operator_hint: str | None = None,
    operator_sources: Mapping[str, Mapping[str, str]] | None = None,
    sandbox_policy: SandboxPolicy | None = None,
    checkpoint_path: str | os.PathLike[str] | None = None,
    validation_variants: bool = True,
    start_ahead: bool | None = None,
    sanitizer_tools: tuple[str, ...] | None = None,
    rounds: RoundChildren | None = None,
) -> dict[str, Any]:
    """Evaluate a bundle on this machine and return the results document (atrex-results/1).

    Operators are evaluated one at a time, each in a fresh child; with ``start_ahead``
    (default: on CUDA, where the sandbox allows it, see ``Sandbox.can_overlap``) the next
    operator's child starts its harness while the current one measures
    (``ChildStarter``). On CPU it stays off by default: there the start-up is short and
    the two processes would share the cores the measurement runs on.

    With ``checkpoint_path``, a results document of the operators finished so far
    (``"partial": true``, scores over those operators only) is written there after each
    operator, so that a run killed from outside (a deadline, a lost node) keeps what it
    measured; the caller removes it once the final document is written.

    ``sanitizer_tools`` (default on CUDA: ``evaluator.sanitizer.DEFAULT_TOOLS``; none on
    the CPU, and none where ``compute-sanitizer`` is not found, which the environment
    digest's ``sanitizer`` section says) call each operator's smallest shape once more
    under NVIDIA's ``compute-sanitizer``, after every operator has been measured: a memory
    error it reports makes the shape ``incorrect`` (code ``memory_error``), and so the
    operator (``_sanitize_operators``).

    ``validation_variants`` (default on) also checks each operator at its hidden validation
    variants (``evaluator.variants``); a run an agent sees the results of (``--visibility
    public``) turns them off, so that variants stay hidden.

    ``operators`` restricts the suite (importance renormalised among them); shape set,
    hardware profile and seed default per device (smoke/cpu-dev on CPU, full/h200-sxm on
    CUDA; a random seed). A bundle the user must fix gives a document whose ``error``
    has a ``bundle:*`` code. Child logs go to ``log_dir`` (``<operator>.log``), or are
    discarded with the run's scratch space when it is None.

    Operators that the evaluator does not implement run from their uploaded sources
    (``operator_sources``, ``{slug: {"reference.py": ..., "input.py": ...}}``; read from
    the suite file's ``operator_sources`` when ``suite`` is a path; see
    ``evaluator.upstream``).

    Every child runs in the OS sandbox that ``sandbox_policy`` describes (default: from
    the environment, see ``SandboxPolicy.from_environment``); what is active is in the
    environment digest's ``sandbox`` section. Raises SandboxError (a platform error)
    when the policy requires a protection this machine cannot give.

    ``rounds`` (an agent campaign's evaluator server, ``evaluator.serve``) supplies the
    sandbox and the children instead: the bundle goes into the folder of a child it
    started (and warmed up) before, and it starts the next round's child ahead.
    """
    started, started_at = time.monotonic(), _now()
    device_kind = "cuda" if device.startswith("cuda") else "cpu"
    full_suite, profile, file_sources = _resolve_inputs(suite, hardware, device)
    sources = dict(operator_sources) if operator_sources is not None else file_sources
    run_suite = full_suite.restrict(operators) if operators else full_suite
    shape_set = shape_set or DEFAULT_SHAPE_SET[device_kind]
    seed = seed if seed is not None else int.from_bytes(os.urandom(8), "big") >> 1
    progress = ProgressWriter(progress_path)
    environment = collect_environment(device)
    selected = run_suite.operator_slugs()
    shapes = {op: run_suite.shapes_for(op, shape_set) for op in selected}
    state = RunState(progress=progress, shapes_total=sum(len(s) for s in shapes.values()))
    error: dict[str, str] | None = None
    manifest: BundleManifest | None = None
    entries: list[dict[str, Any]] = []
    policy = sandbox_policy or SandboxPolicy.from_environment()

    def document(*, partial: bool) -> dict[str, Any]:
        """The results document of the operators in ``entries`` (all of them, or those
        finished so far when ``partial``: scored with their importance renormalised)."""
        if error:
            scores = None
        elif partial:
            done = {entry["operator"] for entry in entries}
            importance = {k: v for k, v in run_suite.importance().items() if k in done}
            scores = summarize(operators=entries, importance=importance)
        else:
            scores = summarize(operators=entries, importance=run_suite.importance())
        bundle_block = None
        if manifest is not None:
            bundle_block = {
                "operators": sorted(manifest.operators),
                "warnings": manifest.warnings,
                "metadata": manifest.metadata,
            }
        result = results_document(
            suite={
                "name": full_suite.name,
                "version": full_suite.version,
                "hash": full_suite.content_hash,
                "shape_set": shape_set,
            },
            hardware=profile.to_dict(),
            environment=environment,
            seed_digest="sha256:" + hashlib.sha256(str(seed).encode()).hexdigest(),
            started_at=started_at,
            finished_at=None if partial else _now(),
            wall_s=time.monotonic() - started,
            error=error,
            bundle=bundle_block,
            operators=list(entries),
            scores=scores,
        )
        if partial:
            result["partial"] = True
            result["operators_pending"] = [op for op in selected if op not in done]
        return result

    with contextlib.ExitStack() as stack:
        if rounds is None:
            made = stack.enter_context(tempfile.TemporaryDirectory(prefix="atrex-run-"))
            scratch_dir = Path(made)
            sandbox = Sandbox(policy=policy, scratch=scratch_dir, device=device_kind)
            environment["sandbox"] = sandbox.probe()
            bundle_dir = scratch_dir / "bundle"
        else:
            sandbox, environment["sandbox"] = rounds.sandbox, rounds.sandbox_report
            bundle_dir = rounds.prepare(selected)
            stack.callback(rounds.finish)
            scratch_dir = bundle_dir.parent
        try:
            manifest = extract_bundle(
                bundle_path,
                bundle_dir,
                known_operators=known_operator_names(full_suite),
                operator_hint=operator_hint,
                strict=False,
            )
        except BundleError as exc:
            error = exc.to_dict()
        if manifest is not None:
            progress.emit("start", shapes_total=state.shapes_total, operators=selected)
            sandbox.prepare_bundle(bundle_dir)
            logs = Path(log_dir) if log_dir else scratch_dir / "logs"
            with_child = [
                op for op in selected if op in manifest.operators and op not in manifest.problems
            ]
            after = dict(zip(with_child, with_child[1:], strict=False))
            if rounds is None:
                starter = ChildStarter(
                    sandbox=sandbox, device=device, bundle_dir=bundle_dir, log_dir=logs,
                    ahead=device_kind == "cuda" if start_ahead is None else start_ahead,
                )  # fmt: skip
            else:
                starter = rounds.starter(logs)
            environment["start_ahead"] = starter.ahead
            with starter:
                for operator in selected:
                    if checkpoint_path is not None and entries:
                        write_results(checkpoint_path, document(partial=True))
                    entries.append(
                        _evaluate_operator(
                            operator=operator,
                            suite=run_suite,
                            shapes=shapes[operator],
                            manifest=manifest,
                            bundle_dir=bundle_dir,
                            starter=starter,
                            next_operator=after.get(operator),
                            hardware=profile,
                            device=device,
                            seed=seed,
                            time_budget_s=time_budget_s,
                            shape_timeout_s=shape_timeout_s or DEFAULT_SHAPE_TIMEOUT_S,
                            state=state,
                            operator_source=(
                                {
                                    "files": dict(sources[operator]),
                                    "dtype": run_suite.operator(operator).dtype,
                                }
                                if operator in sources
                                else None
                            ),
                            validation_variants=validation_variants,
                        )
                    )
            tools = (
                memory_sanitizer.DEFAULT_TOOLS if device_kind == "cuda" else ()
            ) if sanitizer_tools is None else tuple(sanitizer_tools)  # fmt: skip
            executable = memory_sanitizer.find_sanitizer() if tools else None
            if tools and executable is None:
                environment["sanitizer"] = {"missing": "compute-sanitizer was not found"}
            elif tools and executable is not None:
                smallest = {}
                for operator in with_child:
                    small = memory_sanitizer.smallest_shape(shapes[operator])
                    done = {e["operator"]: e for e in entries}.get(operator)
                    statuses = {s["shape_id"]: s["status"] for s in (done or {}).get("shapes", [])}
                    if small is not None and statuses.get(small.shape_id) in ("pass", "fallback"):
                        smallest[operator] = small
                jobs = {
                    operator: _job(
                        operator=operator,
                        manifest=manifest,
                        bundle_dir=bundle_dir,
                        shapes=[smallest[operator]],
                        device=device,
                        seed=seed,
                        time_budget_s=None,
                        threshold_own_share=run_suite.threshold_own_share,
                        operator_source=(
                            {
                                "files": dict(sources[operator]),
                                "dtype": run_suite.operator(operator).dtype,
                            }
                            if operator in sources
                            else None
                        ),
                        validation_variants=False,
                    )
                    for operator in smallest
                }
                try:
                    environment["sanitizer"] = _sanitize_operators(
                        entries=entries,
                        jobs=jobs,
                        smallest=smallest,
                        tools=tools,
                        executable=executable,
                        sandbox=sandbox,
                        device=device,
                        bundle_dir=bundle_dir,
                        log_dir=logs,
                        shape_timeout_s=shape_timeout_s or DEFAULT_SHAPE_TIMEOUT_S,
                    )
                except (SandboxError, OSError) as exc:
                    # The measured results stand; the digest says the check did not run.
                    environment["sanitizer"] = {
                        "executable": executable,
                        "error": f"{type(exc).__name__}: {exc}",
                    }
    if device_kind == "cuda":
        environment["clocks_end"] = gpu_clocks()
    results = document(partial=False)
    scores = results["scores"]
    progress.emit(
        "done",
        aggregate=scores["aggregate"] if scores else None,
        **({"error": error} if error else {}),
    )
    return results
