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
import functools
import hashlib
import json
import os
import secrets
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from evaluator import forkserver, spawner
from evaluator import sanitizer as memory_sanitizer
from evaluator.bundle import BundleManifest, extract_bundle
from evaluator.compile_ahead import valid_specs
from evaluator.concurrency import OperatorSlots, SlotControl, TimingWindow, check_users
from evaluator.environment import collect_environment, gpu_clocks
from evaluator.errors import BundleError
from evaluator.frames import WARM_UP_FAILED, FrameReader, write_frame
from evaluator.hardware import HardwareProfile, get_profile
from evaluator.measurement_policy import MeasurementPolicy
from evaluator.reference_pool import (
    PoolSettings,
    PoolShape,
    ReferencePool,
    ReferenceServer,
    plan_file,
)
from evaluator.reference_timings import ReferenceTimings, TimingCacheSettings, TimingLookup
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
    with_hidden,
)
from evaluator.scoring import operator_score, operator_verdict, summarize
from evaluator.scratch import claim_folder, sweep_killed_folders
from evaluator.suite import ShapeSpec, Suite, load_suite
from evaluator.upstream import load_suite_with_sources
from evaluator.verdicts import merge

DEFAULT_HARDWARE = {"cpu": "cpu-dev", "cuda": "h200-sxm"}
DEFAULT_SHAPE_SET = {"cpu": "smoke", "cuda": "full"}
DEFAULT_SHAPE_TIMEOUT_S = 300.0
"""Longest silence allowed from a child: importing the candidate, or one whole shape."""
DEFAULT_START_AHEAD_DEPTH = 2
"""How many operators' children warm up ahead of their turn where start-ahead is on
(``ChildStarter.depth``): 2 since harness 0.3.9. On the H200, in session 18, the
30-operator submission spent 43.9 s waiting for its children's start-up at 1 and 11.2 s
at 2 (210.9 s against 166.4 s in all, one machine)."""
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
        self.lock = threading.Lock()  # concurrent operators emit from their threads

    def emit(self, event: str, **fields: Any) -> None:
        """Write ``{"event": event, **fields}`` as one line."""
        if self.path is None:
            return
        line = json.dumps({"event": event, **fields}, allow_nan=False)
        with self.lock, open(self.path, "a", encoding="utf-8") as handle:
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
    compile_ahead: dict[str, Any] | None = None
    """What the child compiled ahead of its first shape (a campaign's round), as it said."""
    compiles: list[dict[str, str]] | None = None
    """The Triton specialisations the child compiled (a campaign's round), as it said:
    untrusted, for its campaign's next round only (``evaluator.compile_ahead``)."""

    def mark(self, name: str, at: float) -> None:
        self.marks.setdefault(name, round(at, 3))

    def phases(self) -> dict[str, float]:
        """Where the child's wall time from its job to its exit went: ``start`` (what was
        left of its start-up when the job came: sandbox, interpreter, torch, the device,
        the profiler), ``harness`` (the operator's reference, the integrity snapshot),
        ``import`` (the candidate's import), ``precompile`` (a campaign round's
        specialisations compiled ahead), ``variants`` (hidden validation variants),
        ``shapes``, ``exit`` (tear-down); a phase the child never reached is left out."""
        # Each mark ends the phase named beside it (the launch is at 0).
        names = {"hello": "start", "ready": "harness", "imported": "import",
                 "compiled_ahead": "precompile", "shape_start": "variants", "done": "shapes",
                 "gone": "exit"}  # fmt: skip
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
    reference_write: int | None = None
    """Where pooled reference outputs go to the child (``evaluator.reference_pool``)."""

    def stop(self) -> None:
        """Kill it and everything it started; close its pipes (it never got its job)."""
        _kill(self.process, self.plan.uid)
        for fd in (self.job_write, self.result_read, self.reference_write):
            if fd is None:
                continue
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
    user: int = 0,
    wrapper: list[str] | None = None,
    sanitize: bool = False,
    extra_env: Mapping[str, str] | None = None,
    extra_fds: tuple[int, ...] = (),
    cache: str | None = None,
    cache_from: list[str] | None = None,
    output_fd: int | None = None,
    writable: tuple[Path, ...] = (),
) -> StartedChild:
    """Start ``python -m evaluator.child`` for ``operator`` in its sandbox: it warms up the
    harness (torch, the device, the profiler; nothing of the candidate's) and then waits
    for its job, which ``run_started_child`` sends. Raises SandboxError when the policy
    requires a protection that cannot be applied. ``user`` picks the sandbox user
    (``Sandbox.child``). ``wrapper`` goes before the child's command
    (``compute-sanitizer ...``, see ``evaluator.sanitizer``), and ``sanitize`` makes it a
    sanitized child (``evaluator.child``: no profiler; its CUDA context made before the
    job, no kernel launched before it); ``extra_env`` into
    its environment, ``extra_fds`` are passed on (the sanitizer's log pipe); ``cache`` and
    ``cache_from`` name its Triton cache (``Sandbox.child``); ``output_fd`` takes its stdout
    and stderr instead of ``log_path``; ``writable`` are folders of its own it may write
    (``Sandbox.child``)."""
    job_read, job_write = os.pipe()
    result_read, result_write = os.pipe()
    reference_read, reference_write = os.pipe()
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
        "--reference-fd",
        str(reference_read),
        *(["--sanitize"] if sanitize else []),
    ]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    launched = time.monotonic()
    try:
        plan = sandbox.child(
            operator,
            bundle_dir,
            user=user,
            cache=cache,
            cache_from=cache_from,
            writable=writable,
        )
        env = (
            {"env": {**sandbox.environment(plan, sandbox.device), **extra_env}} if extra_env else {}
        )
        with open(log_path, "ab") as log:
            process = None
            if (
                wrapper is None
                and not sanitize
                and not extra_fds
                and output_fd is None
                and forkserver.enabled(device)
            ):
                # Forked from a warm harness process (evaluator.forkserver); exec'd as
                # below if the server cannot be had.
                environment = env.get("env") or sandbox.environment(plan, sandbox.device)
                for attempt in (1, 2):  # a server found dead is replaced once
                    try:
                        server = forkserver.server_for(environment, device)
                        launched = time.monotonic()  # the server's start is not the child's
                        process, _ = sandbox.launch_forked(
                            functools.partial(server.fork, device=device),
                            plan,
                            log_fd=log.fileno(),
                            passed={
                                "--job-fd": job_read,
                                "--result-fd": result_write,
                                "--reference-fd": reference_read,
                            },
                            env=environment,
                        )
                        break
                    except forkserver.ForkServerError as exc:
                        if attempt == 2:
                            print(f"[harness] {exc}: the child is exec'd", file=sys.stderr)
            if process is None:
                process, _ = sandbox.launch(
                    command,
                    plan,
                    pass_fds=(job_read, result_write, reference_read, *extra_fds),
                    stdin=subprocess.DEVNULL,
                    stdout=log if output_fd is None else output_fd,
                    stderr=subprocess.STDOUT,
                    **env,
                )
    except BaseException:
        os.close(job_write)
        os.close(result_read)
        os.close(reference_write)
        raise
    finally:
        os.close(job_read)
        os.close(result_write)
        os.close(reference_read)
    return StartedChild(operator, process, plan, job_write, result_read, launched, reference_write)


def run_started_child(
    child: StartedChild,
    *,
    job: dict[str, Any],
    shape_timeout_s: float,
    on_record: Callable[[dict[str, Any]], None],
    on_sent: Callable[[], None] | None = None,
    watch_processes: bool = True,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    tap: memory_sanitizer.LogTap | None = None,
    keep_job_pipe: bool = False,
    references: ReferenceServer | None = None,
    slot: SlotControl | None = None,
) -> ChildOutcome:
    """Hand the started child its job and follow it to completion (or one of its limits);
    ``on_sent`` is called once the job is sent (to start the next child ahead);
    ``references`` answers the child's requests for pooled reference outputs (none are
    given without one).

    The job carries a fresh key; every record the child sends back must be signed with
    it (see ``evaluator.child``), and any other bytes on the pipe fail the operator.
    Everything the child started is killed when it ends. The outcome's marks count from
    the moment the job was sent; ``ahead_s`` is how long the child had been up before.
    ``on_event`` sees every message first (a sanitized child's operator boundaries), and
    ``tap`` (the sanitizer's log pipe) is drained as it fills and before each message;
    with ``keep_job_pipe`` the job pipe stays open until the child ends (a sanitized
    child's go-aheads are written to it). ``slot``: its place in a concurrent run's timing
    window (``evaluator.concurrency``).
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
            if not keep_job_pipe:
                os.close(child.job_write)
        if on_sent is not None:
            on_sent()
        _follow(
            process, child.result_read, outcome, shape_timeout_s, on_record,
            key=key, sandbox=child.plan, launched=sent, watch_processes=watch_processes,
            on_event=on_event, tap=tap,
            references=references or ReferenceServer({}), reference_fd=child.reference_write,
            slot=slot,
        )  # fmt: skip
    finally:
        os.close(child.result_read)
        if keep_job_pipe:
            os.close(child.job_write)
        if child.reference_write is not None:
            os.close(child.reference_write)
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

    While one child measures, the next operator's child is started and warms up its
    harness, so its turn begins with torch, the device and the profiler ready; it gets its
    job (and so runs candidate code) only at its turn. A child started ahead that died
    before its turn (the previous candidate took all GPU memory, say) is replaced by a
    fresh one. Use as a context manager: a child never taken is stopped at the end.

    Children alive at once run as different sandbox users (``Sandbox.users``), so that one
    candidate cannot signal, trace or kill another child: each child started here gets the
    first user that no live child of this starter runs as (turn and turn about for the
    operators' children; the sanitizer's children, ``SanitizerPass``, take the others).
    Safe to call from several threads.

    ``depth`` 2 keeps a second child warming behind the next one (``start_ahead`` for the
    operator after next), so that an operator shorter than a child's start-up does not
    leave the following one waiting for the rest of it; it needs a sandbox user more
    (where none is free, that child starts at its turn, as with depth 1).
    """

    def __init__(
        self, *, sandbox: Sandbox, device: str, bundle_dir: Path, log_dir: Path,
        ahead: bool = True, depth: int = 1,
    ) -> None:  # fmt: skip
        self.sandbox = sandbox
        self.device = device
        self.bundle_dir = bundle_dir
        self.log_dir = log_dir
        self.ahead = ahead and sandbox.can_overlap
        self.depth = min(max(1, depth), 2)
        self._next: StartedChild | None = None
        self._after: StartedChild | None = None  # depth 2: the one after the next
        self._live: list[tuple[StartedChild, int]] = []
        self._lock = threading.Lock()

    def __enter__(self) -> ChildStarter:
        return self

    def __exit__(self, *exc: object) -> None:
        for waiting in (self._next, self._after):
            if waiting is not None:
                waiting.stop()
        self._next = self._after = None

    def _start(self, operator: str) -> StartedChild:
        return self.start(operator, log_path=self.log_path(operator), cache=operator)

    def job_extras(self, operator: str) -> dict[str, Any]:
        """What an operator's child gets in its job beyond the run's: nothing here (a
        campaign's rounds, ``evaluator.serve.RoundStarter``, ask for the specialisations
        compiled and hand on the previous round's)."""
        return {}

    def compiled(self, operator: str, specs: list[dict[str, str]]) -> None:
        """The Triton specialisations ``operator``'s child said it compiled: not kept here
        (see ``job_extras``)."""

    def free_users(self) -> int:
        """How many more children may start now: sandbox users no live child of this
        starter runs as."""
        with self._lock:
            return self.sandbox.users - len(self._alive())

    def _alive(self) -> list[tuple[StartedChild, int]]:
        self._live = [(child, user) for child, user in self._live if child.process.poll() is None]
        return self._live

    def launch(self, make: Callable[[int], StartedChild]) -> StartedChild:
        """``make(user)`` with the first sandbox user no live child runs as; the child is
        counted as alive until its process has ended. Raises SandboxError when every user
        is taken."""
        with self._lock:
            taken = {user for _, user in self._alive()}
            free = [user for user in range(self.sandbox.users) if user not in taken]
            if not free:
                raise SandboxError(
                    f"no sandbox user is free for another child ({len(taken)} alive): "
                    f"{self.sandbox.no_overlap_reason or self.sandbox.no_third_reason}"
                )
            # From the spawner's thread: a child is killed when the thread that started it
            # ends (evaluator.spawner), and an operator's thread ends before its next does.
            user = free[0]
            child = spawner.call(lambda: make(user))
            self._live.append((child, user))
            return child

    def start(
        self,
        label: str,
        *,
        log_path: Path,
        cache: str | None = None,
        cache_from: list[str] | None = None,
        wrapper: list[str] | None = None,
        sanitize: bool = False,
        extra_env: Mapping[str, str] | None = None,
        extra_fds: tuple[int, ...] = (),
        output_fd: int | None = None,
    ) -> StartedChild:
        """Start a child now (``label`` names its sandbox folder). Its Triton cache is the
        run's folder ``cache`` (an operator's regular child), or a new one holding copies of
        the caches of ``cache_from`` (the sanitized child: nothing compiles under the tool);
        ``wrapper``, ``sanitize``, ``extra_env`` and ``extra_fds`` as for ``start_child``."""
        return self.launch(
            lambda user: start_child(
                operator=label,
                bundle_dir=self.bundle_dir,
                device=self.device,
                log_path=log_path,
                sandbox=self.sandbox,
                user=user,
                wrapper=wrapper,
                sanitize=sanitize,
                extra_env=extra_env,
                extra_fds=extra_fds,
                cache=cache or label,
                cache_from=cache_from,
                output_fd=output_fd,
            )
        )

    def log_path(self, operator: str) -> Path:
        """The log of ``operator``'s child."""
        return self.log_dir / f"{operator}.log"

    def take(self, operator: str) -> StartedChild:
        """The child for ``operator``: the one started ahead if it is still alive, else a
        new one."""
        ready, self._next, self._after = self._next, self._after, None
        if ready is not None and ready.operator == operator and ready.process.poll() is None:
            return ready
        if ready is not None:
            ready.stop()
        return self._start(operator)

    def start_ahead(self, operator: str | None) -> None:
        """Start ``operator``'s child now, for its turn after the running one (or, with
        ``depth`` 2 and the next one started, after the next)."""
        if not self.ahead or operator is None:
            return
        if self._next is None:
            try:
                self._next = self._start(operator)
            except SandboxError:
                self._next = None  # raised again, at its turn, by take()
        elif self.depth > 1 and self._after is None and self._next.operator != operator:
            try:
                self._after = self._start(operator)
            except SandboxError:
                self._after = None  # no user free: started at its turn


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
        writable=[p for p in (sandbox.private_tmp, sandbox.cache_dir, *sandbox.writable) if p]
        if sandbox is not None
        else [],
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
    on_event: Callable[[dict[str, Any]], None] | None = None,
    tap: memory_sanitizer.LogTap | None = None,
    references: ReferenceServer | None = None,
    reference_fd: int | None = None,
    slot: SlotControl | None = None,
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
        if slot is not None:
            if slot.idle():  # paused by the runner, or waiting for the timing window
                deadline = time.monotonic() + shape_timeout_s
                left = shape_timeout_s
            elif (overdue := slot.overdue(shape_timeout_s)) is not None:
                _kill(process, uid)
                outcome.fail("timeout", overdue, "timeout")
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
        watched = [fd] if tap is None or tap.ended else [fd, tap.read_fd]
        ready, _, _ = select.select(watched, [], [], min(left, MEMORY_CHECK_INTERVAL_S))
        if tap is not None:
            tap.drain()  # the sanitizer never waits on a full pipe
        if fd not in ready:
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
            if tap is not None:
                tap.drain()  # what the tool wrote before this frame is in the log now
            if on_event is not None:
                on_event(message)
            event = message.get("event")
            if event in ("hello", "ready", "imported", "compiled_ahead", "shape_start", "done"):
                outcome.mark(str(event), now - launched)
            if event == "shape_start":
                current = f"shape {message.get('shape_id')}"
            elif event == "operator_start":
                current = f"operator {str(message.get('operator'))!r}"
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
            elif event == "compiled_ahead" and outcome.compile_ahead is None:
                outcome.compile_ahead = {
                    k: message[k]
                    for k in (
                        "compiled",
                        "skipped",
                        "failed",
                        "forks",
                        "fork_s",
                        "seconds",
                        "error",
                        "rehearsal_s",
                        "rehearsal_error",
                    )
                    if isinstance(message.get(k), (int, float, str))
                }
            elif event == "compiles" and outcome.compiles is None:
                outcome.compiles = valid_specs(message.get("specs"))
            elif event == "reference_request" and reference_fd is not None:
                (references or ReferenceServer({})).serve(reference_fd, message)
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
    pool_plans: Mapping[str, Any] | None = None,
    reference_times: Mapping[str, Mapping[str, Any]] | None = None,
    measurement: MeasurementPolicy | None = None,
) -> dict[str, Any]:
    plans = pool_plans or {}
    cached = reference_times or {}
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
                **({"pool": plans[s.shape_id]} if s.shape_id in plans else {}),
                **({"reference_time": dict(cached[s.shape_id])} if s.shape_id in cached else {}),
            }
            for s in shapes
        ],
    }
    if plans:
        job["reference_pool"] = True
    if measurement is not None:
        job["measurement"] = measurement.to_dict()  # trials and timing rule (the child's)
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
        with self.progress.lock:
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
    on_sent: Callable[[], None] | None,
    hardware: HardwareProfile,
    device: str,
    seed: int,
    time_budget_s: float | None,
    shape_timeout_s: float,
    state: RunState,
    operator_source: Mapping[str, Any] | None = None,
    validation_variants: bool = True,
    pool: ReferencePool | None = None,
    suite_hash: str = "",
    timings: ReferenceTimings | None = None,
    window: TimingWindow | None = None,
    measurement: MeasurementPolicy | None = None,
) -> dict[str, Any]:
    """Evaluate one operator in its child (``on_sent`` is called as soon as it has its
    job: the next operator's child, or the sanitizer's, starts ahead) and return its entry
    of results.json.

    With a ``pool``, each shape with enough live entries gets a trial plan drawn from it
    (``ReferencePool.draw``) and the child's requests for their outputs are served; the
    entries retired by this job are removed once the child is gone.

    With ``timings`` (the worker's eager reference timings), each shape is looked up first:
    a hit goes into the job (the child does not time the reference there) and the shape's
    entry reports the runner's copy of the figure; a shape that missed and passed is stored
    once the child is gone, unless the operator was tampered with or held for review.

    With a ``window`` (a concurrent run, ``evaluator.concurrency``) the child takes its
    turn in the run's exclusive timing window."""
    threshold = suite.threshold_own_share
    by_id = {shape.shape_id: shape for shape in shapes}
    entries: dict[str, dict[str, Any]] = {}
    warnings: list[str] = []
    variants: list[dict[str, Any]] = []
    child_wall_s: float | None = None
    child_phases: dict[str, float] = {}
    ahead_s: float | None = None
    compiled_ahead: dict[str, Any] | None = None

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
        looked_up: dict[str, TimingLookup] = {}
        if timings is not None and operator_source is None:
            looked_up = {s.shape_id: timings.lookup(suite_hash, operator, s) for s in shapes}
        hits = {k: v.figure for k, v in looked_up.items() if v.figure is not None}
        to_store: dict[str, dict[str, Any]] = {}

        def on_record(record: dict[str, Any]) -> None:
            shape = by_id.get(str(record.get("shape_id")))
            if shape is None or shape.shape_id in entries:
                return
            lookup = looked_up.get(shape.shape_id)
            if lookup is not None and record.get("reference_time_s") is not None:
                if lookup.figure is not None:
                    # The runner's own copy, whatever the child (candidate code ran in it)
                    # reports back.
                    record.update(
                        reference_time_s=lookup.figure["time_s"],
                        reference_spread_s=lookup.figure["spread_s"],
                        reference_reps=lookup.figure["reps"],
                        reference_time_source="cache",
                        reference_cache={"hit": True, **lookup.figure},
                        eager_timed="baseline",
                    )
                elif record.get("eager_timed") != "baseline":
                    # The reference stood in for a baseline that failed: not the figure
                    # the cache keeps.
                    record["reference_cache"] = {"hit": False, "why": "not the baseline's time"}
                else:
                    record["reference_cache"] = {"hit": False, "why": lookup.why}
                    to_store[shape.shape_id] = {
                        "time_s": record.get("reference_time_s"),
                        "spread_s": record.get("reference_spread_s"),
                        "reps": record.get("reference_reps"),
                    }
            for warning in record.get("warnings") or []:
                if warning not in warnings:
                    warnings.append(warning)
            finish(shape, status=str(record.get("status")), measurement=record)

        drawn: dict[str, tuple[PoolShape, list[Any]]] = {}
        if pool is not None and operator_source is None:
            for shape in shapes:
                pool_shape = _pool_shape(operator, shape)
                plan = pool.draw(suite_hash, pool_shape)
                if plan:
                    drawn[shape.shape_id] = (pool_shape, plan)
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
            pool_plans={shape_id: plan for shape_id, (_, plan) in drawn.items()},
            reference_times=hits,
            measurement=measurement,
        )
        job.update(starter.job_extras(operator))
        try:
            child = starter.take(operator)
            outcome = run_started_child(
                child,
                job=job,
                shape_timeout_s=shape_timeout_s,
                on_record=on_record,
                on_sent=on_sent,
                references=pool.server(suite_hash, drawn) if pool is not None and drawn else None,
                **(window.attach(operator, child.job_write, job) if window is not None else {}),
            )
        finally:
            if window is not None:
                window.detach(operator)
            if pool is not None and drawn:
                pool.release(suite_hash, [pool_shape for pool_shape, _ in drawn.values()])
        child_wall_s = outcome.marks.get("gone")
        child_phases = outcome.phases()
        ahead_s = outcome.ahead_s
        compiled_ahead = outcome.compile_ahead
        if outcome.compiles and not outcome.tampered:
            starter.compiled(operator, outcome.compiles)
        status, error = outcome.status, outcome.error
        variants = outcome.variants
        if timings is not None and to_store and not outcome.tampered:
            held = operator_verdict(list(entries.values()))["hold_codes"]
            for shape_id, figure in to_store.items():
                if not held and entries.get(shape_id, {}).get("status") == "pass":
                    timings.store(suite_hash, operator, by_id[shape_id], **figure)
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
        compile_ahead=compiled_ahead,
    )


class _StopChild(Exception):
    """Raised from a sanitized child's event handler: that child is stopped, and a new one
    goes on from the next operator."""


@dataclass
class _SanitizedChild:
    """What one sanitized child did: the operators it started (in order) and finished, their
    records and log windows, and its figures for the digest."""

    number: int
    log_path: Path
    given: list[str] = field(default_factory=list)
    """The operators it was given, in order (it goes as far as it can)."""
    origin: float = 0.0
    """When the pass began (``time.monotonic()``): the digest's times count from it."""
    sent_at: float | None = None
    """When its job was sent (``time.monotonic()``)."""
    refused: bool = False
    """The tool did not start with its log on the runner's pipe (see ``SanitizerPass``)."""
    reached: list[str] = field(default_factory=list)
    finished: set[str] = field(default_factory=set)
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    starts: dict[str, int] = field(default_factory=dict)
    """The log's length when each operator's ``operator_start`` arrived."""
    untrusted: set[str] = field(default_factory=set)
    """Operators whose window stays open to the end of the log (their end cannot be told)."""
    seconds: dict[str, float] = field(default_factory=dict)
    outcome: ChildOutcome | None = None
    data: bytes = b""

    def windows(self) -> list[memory_sanitizer.Window]:
        """Each operator's part of the log: from its start to the next one's, the last
        one's and each untrusted one's to the end of the log."""
        windows = []
        for index, operator in enumerate(self.reached):
            following = self.reached[index + 1] if index + 1 < len(self.reached) else None
            end = None
            if following is not None and operator not in self.untrusted:
                end = self.starts[following]
            windows.append(memory_sanitizer.Window(operator, self.starts[operator], end))
        return windows

    def digest(self) -> dict[str, Any]:
        """Its figures for the environment digest: the operators it reached, ``start_s``
        (from its job to ready), ``ahead_s`` (how long it had been up before its job: about
        the last operator's turn for one started ahead), ``seconds`` (from its job to its
        exit), ``job_at_s`` and ``gone_at_s`` (when its job was sent and when it was gone,
        counted from the pass's beginning), how it ended and its log."""
        outcome = self.outcome or ChildOutcome()
        gone = outcome.marks.get("gone")
        sent = None if self.sent_at is None else self.sent_at - self.origin
        return {
            "operators": list(self.reached),
            "start_s": outcome.marks.get("ready"),
            "ahead_s": outcome.ahead_s,
            "seconds": gone,
            "job_at_s": None if sent is None else round(sent, 3),
            "gone_at_s": None if sent is None or gone is None else round(sent + gone, 3),
            "ended": "done" if "done" in outcome.marks else (outcome.error or "stopped"),
            "log": self.log_path.name,
        }


UNTRUSTED_END_CODES = frozenset({"outside_work", "tampering"})
"""A sanitized call with one of these codes may have left work running past its
``operator_done``: its window stays open to the end of the child's log."""


def _start_sanitized(
    *,
    number: int,
    tool: str,
    cache_from: list[str],
    executable: str,
    starter: ChildStarter,
    log_dir: Path,
    own_log: bool = True,
) -> tuple[memory_sanitizer.LogTap, StartedChild]:
    """Start a child under ``compute-sanitizer`` (``tool``), its reports on a ``LogTap``
    (``sanitizer-<tool>-<number>.log``), the Triton caches of ``cache_from`` copied in; it
    warms up (no profiler, its CUDA context made, no kernel launched) and waits for its
    job. Without ``own_log`` (a tool that would not write to
    the pipe by path) the tap takes the child's stdout and stderr, the tool's reports
    among the candidate's prints."""
    log_path = log_dir / f"sanitizer-{tool}-{number}.log"
    child_log = log_dir / f"sanitizer-{tool}-{number}.child.log"
    log_dir.mkdir(parents=True, exist_ok=True)
    for path in (log_path, child_log):
        path.unlink(missing_ok=True)
    tap = memory_sanitizer.LogTap(log_path)
    try:
        child = starter.start(
            f"sanitizer-{tool}-{number}",
            log_path=child_log,
            wrapper=memory_sanitizer.command(executable, tool, tap.write_fd if own_log else None),
            sanitize=True,
            extra_env=memory_sanitizer.SANITIZER_ENV,
            extra_fds=(tap.write_fd,) if own_log else (),
            cache_from=cache_from,
            output_fd=None if own_log else tap.write_fd,
        )
    except BaseException:
        tap.close()
        raise
    tap.close_write_end()
    return tap, child


def _run_sanitized_child(
    *,
    number: int,
    tool: str,
    operators: list[str],
    jobs: Mapping[str, dict[str, Any]],
    smallest: Mapping[str, ShapeSpec],
    executable: str,
    starter: ChildStarter,
    log_dir: Path,
    shape_timeout_s: float,
    prepared: tuple[memory_sanitizer.LogTap, StartedChild] | None = None,
    own_log: bool = True,
    origin: float = 0.0,
) -> _SanitizedChild:
    """One child under ``compute-sanitizer`` (``tool``) for ``operators``, in order, until
    it finishes them, crashes or is stopped (``_StopChild``); see ``evaluator.sanitizer`` for
    the windows and why they hold. ``prepared``: that child, started ahead
    (``_start_sanitized``); ``origin``: when the pass began."""
    tap, child = prepared or _start_sanitized(
        number=number, tool=tool, cache_from=operators, executable=executable,
        starter=starter, log_dir=log_dir, own_log=own_log,
    )  # fmt: skip
    run = _SanitizedChild(
        number=number, log_path=Path(tap.path), given=list(operators), origin=origin
    )
    job = {
        "operator": operators[0],
        "bundle_dir": jobs[operators[0]]["bundle_dir"],
        "device": jobs[operators[0]]["device"],
        "seed": jobs[operators[0]]["seed"],
        "sanitize": True,
        "operators": [
            {
                "operator": op,
                "module_path": jobs[op]["module_path"],
                "shape": next(
                    s for s in jobs[op]["shapes"] if s["shape_id"] == smallest[op].shape_id
                ),
                **({"operator_source": jobs[op]["operator_source"]}
                   if "operator_source" in jobs[op] else {}),
            }
            for op in operators
        ],
    }  # fmt: skip
    started_at: dict[str, float] = {}
    holder: list[StartedChild] = []
    go = [""]  # the token the next operator_start must carry back

    def settle() -> None:
        """Wait until the tool's log has been quiet for QUIET_S (at most SETTLE_MAX_S)."""
        deadline = time.monotonic() + memory_sanitizer.SETTLE_MAX_S
        size, quiet_since = tap.drain(), time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.02)
            now = time.monotonic()
            if tap.drain() != size:
                size, quiet_since = tap.size, now
            elif now - quiet_since >= memory_sanitizer.QUIET_S:
                return

    def on_event(message: dict[str, Any]) -> None:
        event, operator = message.get("event"), str(message.get("operator"))
        if event in ("operator_start", "operator_done", "shape") and operator not in operators:
            raise _StopChild(f"a record for an operator it was not given ({operator!r})")
        if event == "operator_start":
            if operator in run.starts:
                raise _StopChild(f"operator {operator!r} started twice")
            if run.reached and (run.reached[-1] not in run.finished or message.get("go") != go[0]):
                # It did not wait for the go-ahead: the previous window has no known end.
                run.untrusted.add(run.reached[-1])
            run.reached.append(operator)
            run.starts[operator] = tap.size
            started_at[operator] = time.monotonic()
        elif event == "shape" and isinstance(message.get("result"), dict):
            run.records[operator] = message["result"]
        elif event == "operator_done":
            if not run.reached or run.reached[-1] != operator or operator in run.finished:
                raise _StopChild(f"operator {operator!r} done out of turn")
            run.finished.add(operator)
            run.seconds[operator] = round(time.monotonic() - started_at[operator], 3)
            record = run.records.get(operator) or {}
            if UNTRUSTED_END_CODES.intersection(record.get("codes") or []):
                run.untrusted.add(operator)
            if operator == operators[-1]:
                return  # the last: its window runs to the end of the log
            settle()
            printed = memory_sanitizer.parse_report(tap.text(), tool).findings
            if len(printed) >= memory_sanitizer.PRINT_LIMIT:
                # The tool prints no more reports in this process: a new one goes on.
                raise _StopChild("the sanitizer's print limit was reached")
            go[0] = secrets.token_hex(memory_sanitizer.GO_TOKEN_BYTES // 2)
            try:
                os.write(holder[0].job_write, go[0].encode("ascii"))
            except OSError:
                pass  # the child is gone; its end tells the rest

    def sent() -> None:
        run.sent_at = time.monotonic()

    try:
        holder.append(child)
        try:
            run.outcome = run_started_child(
                child, job=job, shape_timeout_s=shape_timeout_s, on_record=lambda _: None,
                on_sent=sent, watch_processes=False, on_event=on_event, tap=tap,
                keep_job_pipe=True,
            )  # fmt: skip
        except _StopChild as stop:
            run.outcome = ChildOutcome()
            run.outcome.fail("runtime_error", f"stopped: {stop}", "crashed")
    finally:
        tap.close()
    for operator in run.reached:
        if operator not in run.finished:
            run.seconds[operator] = round(time.monotonic() - started_at[operator], 3)
    run.data = bytes(tap.data)
    return run


def _pool_shape(operator: str, shape: ShapeSpec) -> PoolShape:
    return PoolShape(
        operator=operator,
        shape_id=shape.shape_id,
        init_kwargs=dict(shape.init_kwargs or {}),
        input_kwargs=dict(shape.input_kwargs or {}),
        q_write=int(shape.q_write or 0),
    )


def _prepare_pool(
    pool: ReferencePool,
    *,
    suite_hash: str,
    shapes: Mapping[str, list[ShapeSpec]],
    device: str,
    scratch: Path,
) -> dict[str, Any]:
    """Fill the run's shapes that are under the pool's low-water mark (first use, or
    entries retired), in a harness process of their own (``python -m evaluator pool fill
    --plan``: no candidate code, not sandboxed, the only writer of the pool); what it did,
    for the environment digest. A fill that fails leaves those shapes unpooled."""
    settings = pool.settings
    summary: dict[str, Any] = {**settings.to_dict(), "key": pool.root.name, "fill_s": 0.0}
    wanted = pool.needs_fill(
        suite_hash, [_pool_shape(op, shape) for op, listed in shapes.items() for shape in listed]
    )
    summary["shapes_to_fill"] = len(wanted)
    if not wanted or not settings.fill:
        return summary
    plan_path = scratch / "pool-plan.json"
    plan_path.write_text(
        json.dumps(plan_file(suite_hash, wanted, settings, device)), encoding="utf-8"
    )
    package_root = str(Path(__file__).resolve().parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
    started = time.monotonic()
    completed = subprocess.run(  # noqa: S603 - fixed argv, the harness's own command
        [sys.executable, "-m", "evaluator", "pool", "fill", "--plan", str(plan_path)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    summary["fill_s"] = round(time.monotonic() - started, 3)
    if completed.returncode != 0:
        summary["fill_error"] = (completed.stderr or completed.stdout)[-2000:]
        return summary
    try:
        report = json.loads(completed.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        report = {}
    summary["entries_written"] = report.get("written")
    summary["shapes_refused"] = len(report.get("refused") or {})
    return summary


def sanitized_shapes(
    operators: list[str], shapes: Mapping[str, list[ShapeSpec]], entries: list[dict[str, Any]]
) -> dict[str, ShapeSpec]:
    """The shape the sanitizer calls, per operator it checks: the operator's smallest shape
    (``evaluator.sanitizer.smallest_shape``), where that shape passed or fell back and at
    least one of the operator's shapes passed. An operator that passed no shape scores 0
    whatever the sanitizer finds, so it is not checked (docs/decisions.md 21): on the
    30-operator submission the PyTorch fallbacks' calls under racecheck were 180 of the
    pass's 190 s, and racecheck's reports on cuBLAS's own kernels could only relabel a
    fallback ``incorrect``."""
    by_operator = {entry["operator"]: entry for entry in entries}
    chosen: dict[str, ShapeSpec] = {}
    for operator in operators:
        small = memory_sanitizer.smallest_shape(shapes[operator])
        statuses = {
            s["shape_id"]: s["status"] for s in (by_operator.get(operator) or {}).get("shapes", [])
        }
        if small is None or statuses.get(small.shape_id) not in ("pass", "fallback"):
            continue
        if "pass" in statuses.values():
            chosen[operator] = small
    return chosen


class SanitizerPass:
    """The compute-sanitizer pass of one run: each checked operator's smallest shape called
    once more under each tool (``evaluator.sanitizer``), after every operator was measured.

    Its children are started ahead (``start_ahead``), while the last operator's child
    still measures, each as a sandbox user that no other live child runs as
    (``ChildStarter``): they warm up (the tool, the interpreter, torch, their CUDA context,
    no kernel) and wait. Their jobs come in ``run``, once every operator's child has ended,
    so no sanitized call runs beside a timed one. There the tools' children run at the
    same time (they only check correctness; nothing is timed in them), one thread following
    each tool's children, as many tools at once as there are sandbox users to run them as
    (else one after another). Each tool goes through its operators in one child, a new one
    going on from the next operator after a crash; its reports are blamed by the windows
    of its own log. The verdicts are then applied tool after tool, as when the tools ran in
    turn: an operator an earlier tool failed keeps that tool's report.

    ``racecheck`` runs only for the operators ``skipped`` does not name: those whose
    regular child compiled kernels, none using shared memory (``racecheck_skips``).
    """

    def __init__(
        self,
        *,
        tools: tuple[str, ...],
        executable: str,
        starter: ChildStarter,
        log_dir: Path,
        shape_timeout_s: float,
    ) -> None:
        self.tools = tools
        self.executable = executable
        self.starter = starter
        self.log_dir = log_dir
        self.shape_timeout_s = shape_timeout_s
        self.shared_log: str | None = None
        """Why the tools' reports are read from the children's output (None: their own log)."""
        self._ahead: dict[str, tuple[memory_sanitizer.LogTap, StartedChild, list[str]]] = {}

    def start_ahead(self, cache_from: list[str]) -> None:
        """Start the first tools' children now, with copies of the Triton caches of
        ``cache_from`` (the operators whose children have ended), while a sandbox user is
        free beside the children alive; a start that fails is left to ``run``."""
        for tool in self.tools:
            if tool in self._ahead:
                continue
            if self.starter.free_users() < 1:
                break
            try:
                tap, child = _start_sanitized(
                    number=1, tool=tool, cache_from=cache_from, executable=self.executable,
                    starter=self.starter, log_dir=self.log_dir,
                )  # fmt: skip
            except (SandboxError, OSError):
                break
            self._ahead[tool] = (tap, child, list(cache_from))

    def close(self) -> None:
        """Stop the children started ahead that were never given a job."""
        for tap, child, _ in self._ahead.values():
            child.stop()
            tap.close()
        self._ahead.clear()

    def run(
        self,
        *,
        entries: list[dict[str, Any]],
        jobs: Mapping[str, dict[str, Any]],
        smallest: Mapping[str, ShapeSpec],
        racecheck: RacecheckPlan | None = None,
    ) -> dict[str, Any]:
        """Check the operators of ``jobs`` (those whose smallest shape passed or fell back;
        ``smallest``: that shape) and fail a shape, with code ``memory_error``, at the first
        error the sanitizer reports in its operator's window (a wrong-answer code: the
        operator is ``incorrect``). A call that crashed the child or failed under the tool
        loses its shape (a loud failure); one that timed out gets a warning. ``racecheck``
        (``racecheck_skips``): the operators not racechecked and why, why the others are,
        and what tells a library kernel's race from the submission's.

        Returns what ran, for the environment digest: ``pass_s`` (the pass's wall time, as
        the evaluation sees it), ``concurrent`` (tools run at once), and per tool the
        operators checked, its ``seconds`` (from the pass's beginning to its last child's
        end), the operators it failed, each child (``_SanitizedChild.digest``) and reports
        outside every operator's window; racecheck's ``skipped`` and ``reasons``."""
        began = time.monotonic()
        by_operator = {entry["operator"]: entry for entry in entries}
        pending = [op for op in jobs if op in smallest]
        racecheck = racecheck or RacecheckPlan()
        skipped = racecheck.skipped
        plans = {
            tool: [op for op in pending if not (tool == "racecheck" and op in skipped)]
            for tool in self.tools
        }
        ready = [tool for tool in self._ahead if self._ahead[tool][1].process.poll() is None]
        width = max(1, self.starter.free_users() + len(ready))
        results: dict[str, tuple[list[_SanitizedChild], float]] = {}
        failures: list[BaseException] = []

        def check(tool: str) -> None:
            try:
                results[tool] = self._children(tool, plans[tool], jobs, smallest, began)
            except BaseException as exc:  # raised again below, once every tool has ended
                failures.append(exc)

        try:
            for first in range(0, len(self.tools), width):
                wave = self.tools[first : first + width]
                threads = [
                    threading.Thread(target=check, args=(tool,), name=f"sanitizer-{tool}")
                    for tool in wave[1:]
                ]
                for thread in threads:
                    thread.start()
                check(wave[0])
                for thread in threads:
                    thread.join()
        finally:
            self.close()
        if failures:
            raise failures[0]
        summary: dict[str, Any] = {
            "executable": self.executable,
            "pass_s": round(time.monotonic() - began, 3),
            "concurrent": min(width, len(self.tools)),
            "tools": {},
        }
        if self.shared_log is not None:
            summary["shared_log"] = self.shared_log
        failed_before: set[str] = set()
        for tool in self.tools:
            runs, seconds = results[tool]
            figures = self._judge(tool, runs, by_operator, smallest, failed_before, racecheck)
            failed_before.update(figures["failed"])
            summary["tools"][tool] = {"operators": plans[tool], "seconds": seconds, **figures}
            if tool == "racecheck":
                summary["tools"][tool]["skipped"] = skipped
                summary["tools"][tool]["reasons"] = {
                    op: why for op, why in racecheck.reasons.items() if op in plans[tool]
                }
        return summary

    def _take_ahead(
        self, tool: str, operators: list[str]
    ) -> tuple[memory_sanitizer.LogTap, StartedChild] | None:
        """The child started ahead for ``tool``, alive and with the caches it lacks copied
        in (those of operators whose children had not ended when it started), or None."""
        prepared = self._ahead.pop(tool, None)
        if prepared is None:
            return None
        tap, child, copied = prepared
        if child.process.poll() is not None:  # it died while it waited: a fresh one
            child.stop()
            tap.close()
            return None
        self.starter.sandbox.fill_cache(child.plan, [op for op in operators if op not in copied])
        return tap, child

    def _children(
        self,
        tool: str,
        operators: list[str],
        jobs: Mapping[str, dict[str, Any]],
        smallest: Mapping[str, ShapeSpec],
        began: float,
    ) -> tuple[list[_SanitizedChild], float]:
        """``tool``'s children for ``operators``: one, and a new one from the next operator
        after each that crashed or was stopped; and the seconds from ``began`` to the last
        one's end. A tool that does not take the pipe by path (its first child never
        starts and writes nothing) runs again with its reports on the child's output."""
        runs: list[_SanitizedChild] = []
        queue = list(operators)
        prepared = self._take_ahead(tool, operators) if queue else None
        while queue:
            own_log = self.shared_log is None
            if prepared is not None and not own_log:
                prepared[1].stop()  # started with its log on the pipe, which the tool refused
                prepared[0].close()
                prepared = None
            run = _run_sanitized_child(
                number=len(runs) + 1, tool=tool, operators=queue, jobs=jobs,
                smallest=smallest, executable=self.executable, starter=self.starter,
                log_dir=self.log_dir, shape_timeout_s=self.shape_timeout_s,
                prepared=prepared, own_log=own_log, origin=began,
            )  # fmt: skip
            prepared = None
            runs.append(run)
            outcome = run.outcome or ChildOutcome()
            if "hello" not in outcome.marks and not run.data and own_log:
                # The tool wrote nothing and the child never started: this tool may not
                # take the pipe by path. Again with its reports on the child's own output,
                # where a candidate's prints can sit among them (the digest says so).
                run.refused = True
                self.shared_log = self.shared_log or (
                    f"compute-sanitizer did not start with --log-file on a pipe "
                    f"({outcome.error}); its reports were read from the children's output"
                )
                continue
            if not run.reached:
                break
            queue = queue[queue.index(run.reached[-1]) + 1 :]
        return runs, round(time.monotonic() - began, 3)

    def _judge(
        self,
        tool: str,
        runs: list[_SanitizedChild],
        by_operator: dict[str, dict[str, Any]],
        smallest: Mapping[str, ShapeSpec],
        failed_before: set[str],
        racecheck: RacecheckPlan,
    ) -> dict[str, Any]:
        """Apply ``tool``'s reports to the operators' entries (``_judge_sanitized``), except
        for those an earlier tool failed (``failed_before``); its figures for the digest.
        racecheck's reports inside library kernels only are not the submission's
        (``evaluator.sanitizer.library_race``, from each operator's compiled kernels and the
        bundle's native code in ``racecheck``): the operator gets a warning and the
        digest lists them (``library_races``), the verdict stands."""
        failed: list[str] = []
        outside: list[str] = []
        library: dict[str, list[str]] = {}
        per_operator: dict[str, float] = {}
        for run in runs:
            if run.refused:
                continue
            per_operator.update(run.seconds)
            outcome = run.outcome or ChildOutcome()
            reports, before = memory_sanitizer.attribute(run.data, run.windows(), tool)
            outside += [f.text() for f in before.findings]
            for operator in run.reached:
                if operator in failed_before:
                    continue  # keeps the earlier tool's report, its first
                report = reports[operator]
                if tool == "racecheck":
                    report, dropped = memory_sanitizer.without_library_races(
                        report, racecheck.kernels.get(operator, []), racecheck.native
                    )
                    if dropped:
                        library[operator] = [f.headline for f in dropped]
                        by_operator[operator]["warnings"].append(
                            f"compute-sanitizer (racecheck) reported {len(dropped)} hazard(s) "
                            f"inside library kernels only ({dropped[0].headline}), not in the "
                            "submission's code: not counted against it"
                        )
                if _judge_sanitized(
                    entry=by_operator[operator], shape=smallest[operator], tool=tool,
                    report=report, record=run.records.get(operator) or {},
                    finished=operator in run.finished, outcome=outcome, log=run.log_path.name,
                ):  # fmt: skip
                    failed.append(operator)
            if not run.reached:
                for operator in run.given:
                    if operator not in failed_before:
                        by_operator[operator]["warnings"].append(
                            f"the memory check ({tool}) did not run: "
                            f"{outcome.error or 'the sanitized child did not start'}; "
                            f"see {run.log_path.name}"
                        )
        return {
            "per_operator_s": per_operator,
            "failed": failed,
            "children": [run.digest() for run in runs],
            **({"outside_operators": outside} if outside else {}),
            **({"library_races": library} if library else {}),
        }


@dataclass
class RacecheckPlan:
    """What racecheck needs to know of a run's operators (``racecheck_skips``): which it can
    skip and why the others need it, the kernels each operator's regular child compiled
    (their labels, ``evaluator.sanitizer.cache_kernels``) and the bundle's native code."""

    skipped: dict[str, str] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    kernels: dict[str, list[str]] = field(default_factory=dict)
    native: str | None = None


def racecheck_skips(operators: list[str], *, sandbox: Sandbox, bundle_dir: Path) -> RacecheckPlan:
    """Which ``operators`` racecheck (shared-memory hazards) can skip, and why the others
    need it (``evaluator.sanitizer.racecheck_reason``), from the kernels each operator's
    regular child compiled (its Triton cache, ``Sandbox.cache_folder``) and the bundle's
    native code."""
    plan = RacecheckPlan(native=memory_sanitizer.native_code(bundle_dir))
    for operator in operators:
        kernels = memory_sanitizer.cache_kernels(sandbox.cache_folder(operator))
        plan.kernels[operator] = sorted(kernels)
        needed, why = memory_sanitizer.racecheck_reason(kernels, plan.native)
        (plan.reasons if needed else plan.skipped)[operator] = why
    return plan


def _judge_sanitized(
    *,
    entry: dict[str, Any],
    shape: ShapeSpec,
    tool: str,
    report: memory_sanitizer.SanitizerReport,
    record: Mapping[str, Any],
    finished: bool,
    outcome: ChildOutcome,
    log: str,
) -> bool:
    """Turn one operator's sanitized call into its smallest shape's verdict; True when the
    sanitizer found an error (the shape is then ``incorrect``, code ``memory_error``)."""
    error = report.first_error(shape.shape_id)
    if error is not None:
        _fail_shape(entry, shape.shape_id, status="incorrect", error=error, codes=["memory_error"])
        return True
    if record.get("status") in ("runtime_error", "compile_error") or (
        not finished and outcome.status != "timeout" and not record
    ):
        # The call failed, or the child died during it, under the tool (the regular child
        # ran it): a loud failure of this shape.
        what = record.get("error") or outcome.error or "the evaluation process stopped"
        _fail_shape(
            entry,
            shape.shape_id,
            status="runtime_error",
            error=f"shape {shape.shape_id}: under compute-sanitizer ({tool}) the call failed: "
            f"{what}; see {log}",
            codes=list(record.get("codes") or [outcome.unfinished_code])[:1],
        )
    elif not finished:
        entry["warnings"].append(
            f"the memory check ({tool}) of shape {shape.shape_id} did not complete "
            f"({outcome.error or 'no record'}); see {log}"
        )
    return False


def _fail_shape(
    entry: dict[str, Any], shape_id: str, *, status: str, error: str, codes: list[str]
) -> None:
    """Fail one shape of an operator entry after the run (the sanitizer pass), and rescore."""
    for shape_entry_ in entry["shapes"]:
        if shape_entry_["shape_id"] == shape_id:
            shape_entry_.update(
                status=status,
                error=error,
                codes=merge(shape_entry_.get("codes"), codes),
                roofline_fraction=None,
                speedup=None,
            )
    _rescore(entry)


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


def dispatch_order(operators: list[str], costs: Mapping[str, float] | None) -> list[str]:
    """``operators`` in the order to start them: unchanged without ``costs``; else those
    without a cost first (an unknown one may be the longest), then by cost, highest first
    (ties in the given order)."""
    if not costs:
        return list(operators)
    known = sorted((op for op in operators if op in costs), key=lambda op: -float(costs[op]))
    return [op for op in operators if op not in costs] + known


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
    start_ahead_depth: int = DEFAULT_START_AHEAD_DEPTH,
    sanitizer_tools: tuple[str, ...] | None = None,
    reference_pool: PoolSettings | None = None,
    reference_timings: TimingCacheSettings | None = None,
    rounds: RoundChildren | None = None,
    concurrency: int = 1,
    operator_costs: Mapping[str, float] | None = None,
    measurement: MeasurementPolicy | None = None,
) -> dict[str, Any]:
    """Evaluate a bundle on this machine and return the results document (atrex-results/1).

    Operators are evaluated one at a time, each in a fresh child; with ``start_ahead``
    (default: on CUDA, where the sandbox allows it, see ``Sandbox.can_overlap``) the next
    operator's child starts its harness while the current one measures
    (``ChildStarter``). On CPU it stays off by default: there the start-up is short and
    the two processes would share the cores the measurement runs on. ``start_ahead_depth``
    (default 2) is how many children warm up ahead: 2 keeps one more behind the next
    (``ChildStarter``).

    With ``checkpoint_path``, a results document of the operators finished so far
    (``"partial": true``, scores over those operators only) is written there after each
    operator, so that a run killed from outside (a deadline, a lost node) keeps what it
    measured; the caller removes it once the final document is written.

    ``sanitizer_tools`` (default on CUDA: ``evaluator.sanitizer.DEFAULT_TOOLS``; none on
    the CPU, and none where ``compute-sanitizer`` is not found, which the environment
    digest's ``sanitizer`` section says) call each operator's smallest shape once more
    under NVIDIA's ``compute-sanitizer``, after every operator has been measured: a memory
    error it reports makes the shape ``incorrect`` (code ``memory_error``), and so the
    operator (``SanitizerPass``; its children start while the last operator is measured,
    where ``start_ahead`` is on, and the tools run at once).

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

    ``reference_pool`` (default off) draws the correctness trials' seeds and reference
    outputs from this worker's pool (``evaluator.reference_pool``), filling shapes at their
    first use; the pool's folder is hidden from every child. Each shape entry's
    ``reference_pool`` says how its trials used it; the environment digest's, what was
    filled.

    ``reference_timings`` (default off) takes each shape's eager reference time from this
    worker's cache (``evaluator.reference_timings``) where it holds a current figure, and
    stores the ones it times; the folder is hidden from every child. Each shape entry's
    ``reference_time_source`` (``measured`` or ``cache``) and ``reference_cache`` say which;
    the environment digest's ``reference_timings``, the rule and the run's hits and misses.

    Every child runs in the OS sandbox that ``sandbox_policy`` describes (default: from
    the environment, see ``SandboxPolicy.from_environment``); what is active is in the
    environment digest's ``sandbox`` section. Raises SandboxError (a platform error)
    when the policy requires a protection this machine cannot give.

    ``rounds`` (an agent campaign's evaluator server, ``evaluator.serve``) supplies the
    sandbox and the children instead: the bundle goes into the folder of a child it
    started (and warmed up) before, and it starts the next round's child ahead.

    ``concurrency`` above 1 evaluates up to that many operators at once, their timing in
    one exclusive window (``evaluator.concurrency``; each child a sandbox user of its own,
    SandboxError when there are too few); the environment digest's ``concurrency`` holds
    the windows and pauses. Entries, checkpoints and verdicts are as with one at a time.
    ``operator_costs`` (expected seconds per operator, e.g. from earlier runs' wall times)
    then sets the order in which operators start: those without a figure first, then the
    most expensive first, so that the longest one does not start last and run alone at the
    end (``dispatch_order``); entries keep the suite's order.
    ``measurement`` (default: the full policy) sets the correctness trials and the timing
    rule (``evaluator.measurement_policy``); the environment digest's ``measurement``
    names it, and its kind (``round`` for anything lighter than the full policy).
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
    measurement = measurement or MeasurementPolicy()
    environment["measurement"] = measurement.to_dict()
    selected = run_suite.operator_slugs()
    shapes = {op: run_suite.shapes_for(op, shape_set) for op in selected}
    state = RunState(progress=progress, shapes_total=sum(len(s) for s in shapes.values()))
    error: dict[str, str] | None = None
    manifest: BundleManifest | None = None
    entries: list[dict[str, Any]] = []
    policy = sandbox_policy or SandboxPolicy.from_environment()
    pool: ReferencePool | None = None
    if reference_pool is not None:
        pool = ReferencePool(reference_pool, environment=environment).open()
        # Never visible to a child, whatever its user could read.
        policy = with_hidden(policy, [os.path.realpath(reference_pool.directory)])
    timings: ReferenceTimings | None = None
    if reference_timings is not None:
        timings = ReferenceTimings(
            reference_timings,
            environment=environment,
            time_budget_s=time_budget_s,
            timing_rule=measurement.timing_rule(),
        ).open()
        policy = with_hidden(policy, [os.path.realpath(reference_timings.directory)])

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
            # Folders left by runs and fork servers that were killed (evaluator.scratch).
            sweep_killed_folders()
            made = stack.enter_context(tempfile.TemporaryDirectory(prefix="atrex-run-"))
            claim_folder(made)
            scratch_dir = Path(made)
            sandbox = Sandbox(
                policy=policy, scratch=scratch_dir, device=device_kind, concurrent=concurrency
            )
            check_users(sandbox, concurrency)
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
            dispatch = dispatch_order(selected, operator_costs if concurrency > 1 else None)
            with_child = [
                op for op in dispatch if op in manifest.operators and op not in manifest.problems
            ]
            after = dict(zip(with_child, with_child[1:], strict=False))
            if rounds is None:
                starter = ChildStarter(
                    sandbox=sandbox, device=device, bundle_dir=bundle_dir, log_dir=logs,
                    ahead=device_kind == "cuda" if start_ahead is None else start_ahead,
                    depth=start_ahead_depth,
                )  # fmt: skip
            else:
                starter = rounds.starter(logs)
            environment["start_ahead"] = starter.ahead
            if starter.ahead and starter.depth > 1:
                environment["start_ahead_depth"] = starter.depth
            if pool is not None:
                environment["reference_pool"] = _prepare_pool(
                    pool,
                    suite_hash=full_suite.content_hash,
                    shapes={op: shapes[op] for op in with_child if op not in sources},
                    device=device,
                    scratch=scratch_dir,
                )
            tools = (
                memory_sanitizer.DEFAULT_TOOLS if device_kind == "cuda" else ()
            ) if sanitizer_tools is None else tuple(sanitizer_tools)  # fmt: skip
            executable = memory_sanitizer.find_sanitizer() if tools else None
            if tools and executable is None:
                environment["sanitizer"] = {"missing": "compute-sanitizer was not found"}
            sanitizer_pass = None
            if tools and executable is not None:
                sanitizer_pass = SanitizerPass(
                    tools=tools, executable=executable, starter=starter, log_dir=logs,
                    shape_timeout_s=shape_timeout_s or DEFAULT_SHAPE_TIMEOUT_S,
                )  # fmt: skip
                stack.callback(sanitizer_pass.close)

            def on_sent(operator: str) -> Callable[[], None]:
                """What starts ahead once ``operator``'s child has its job: the next
                operator's child; with the last one, the sanitizer's children too (with
                the caches of the operators whose children have ended), as the sandbox
                users left free allow."""
                following = after.get(operator)
                last = with_child[-1] if with_child else None

                def children() -> None:
                    starter.start_ahead(following)
                    if starter.depth > 1:  # and the one after it (ChildStarter.depth)
                        starter.start_ahead(after.get(following) if following else None)

                if operator != last or sanitizer_pass is None or not starter.ahead:
                    return children

                def both() -> None:
                    starter.start_ahead(following)  # a campaign's next round (serve)
                    ended = {entry["operator"] for entry in list(entries)}  # all, one at a time
                    sanitizer_pass.start_ahead([op for op in with_child[:-1] if op in ended])

                return both

            def operator_source(operator: str) -> dict[str, Any] | None:
                """An uploaded operator's sources and dtype, for its child's job."""
                if operator not in sources:
                    return None
                return {
                    "files": dict(sources[operator]),
                    "dtype": run_suite.operator(operator).dtype,
                }

            slots = OperatorSlots(concurrency)
            pool, timings = slots.shared(pool), slots.shared(timings)

            def evaluate(operator: str) -> dict[str, Any]:
                return _evaluate_operator(
                    operator=operator,
                    suite=run_suite,
                    shapes=shapes[operator],
                    manifest=manifest,
                    bundle_dir=bundle_dir,
                    starter=starter,
                    on_sent=slots.on_sent(operator, on_sent(operator)),
                    hardware=profile,
                    device=device,
                    seed=seed,
                    time_budget_s=time_budget_s,
                    shape_timeout_s=shape_timeout_s or DEFAULT_SHAPE_TIMEOUT_S,
                    state=state,
                    operator_source=operator_source(operator),
                    validation_variants=validation_variants,
                    pool=pool,
                    suite_hash=full_suite.content_hash,
                    timings=timings,
                    window=slots.window,
                    measurement=measurement,
                )

            def checkpoint() -> None:
                if checkpoint_path is not None:
                    write_results(checkpoint_path, document(partial=True))

            with starter:
                slots.run(
                    dispatch, evaluate, entries=entries, checkpoint=checkpoint, order=selected
                )
            if slots.window is not None:
                environment["concurrency"] = slots.window.digest(concurrency)
            if sanitizer_pass is not None:
                smallest = sanitized_shapes(with_child, shapes, entries)
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
                        operator_source=operator_source(operator),
                        validation_variants=False,
                    )
                    for operator in smallest
                }
                plan = RacecheckPlan()
                if "racecheck" in tools:
                    plan = racecheck_skips(list(smallest), sandbox=sandbox, bundle_dir=bundle_dir)
                try:
                    environment["sanitizer"] = sanitizer_pass.run(
                        entries=entries, jobs=jobs, smallest=smallest, racecheck=plan,
                    )  # fmt: skip
                except (SandboxError, OSError) as exc:
                    # The measured results stand; the digest says the check did not run.
                    environment["sanitizer"] = {
                        "executable": executable,
                        "error": f"{type(exc).__name__}: {exc}",
                    }
    if timings is not None:
        environment["reference_timings"] = timings.digest()
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
