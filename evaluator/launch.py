"""Start ``python -m evaluator SUBCOMMAND ...`` in a child process: the one way to do it.

The site never imports torch, so everything it asks of the harness (``run``,
``validate-suite``, ``ceilings``, ``work``) runs in a child process with the evaluator's
interpreter. This module is that start, with one policy for all of them (stdlib only:
no Django, no torch):

* **Environment**: only what the evaluator needs passes through (``PASSED_VARIABLES`` and
  the ``ATREX_SANDBOX_*`` limits, which configure its sandbox and hold no secret); no
  database or broker URL, secret key or token. ``PYTHONPATH`` starts with this checkout's
  root, so the child imports this ``evaluator`` whatever its working folder; an inherited
  ``PYTHONPATH`` follows it. ``CUDA_VISIBLE_DEVICES`` passes (a worker's one GPU);
  ``TRITON_INTERPRET`` does not: the evaluator sets it itself for its per-operator
  children on the CPU (``evaluator.sandbox``).
* **Scratch folder**: the child runs in one folder (its working folder and ``HOME``;
  Triton's cache under it unless ``TRITON_CACHE_DIR`` is set), the caller's (a run's own
  folder, kept) or a fresh temporary one removed afterwards (``scratch_folder``).
* **Process**: the child leads a process group of its own; on a timeout, or whatever else
  stops the wait (an exception from ``on_poll``, a signal), the whole group is killed.
  Its output is captured (``stdout``/``stderr`` of the result) or, with ``log_path``,
  appended to a log file as it comes, while ``on_poll`` runs every ``poll_s`` seconds
  (the caller follows a progress file there).
* **Server**: ``EvaluatorServer`` starts a command that answers one request after another
  (``serve``, an agent campaign's rounds) the same way, and is killed with the thread that
  started it or by ``close``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from evaluator.errors import PlatformError

PROJECT_ROOT = Path(__file__).resolve().parents[1]
"""The folder that holds this ``evaluator`` package: first on the child's ``PYTHONPATH``."""
PASSED_VARIABLES = (
    "PATH",
    "LANG",
    "LC_ALL",
    "CUDA_VISIBLE_DEVICES",
    "OMP_NUM_THREADS",
    "OMP_WAIT_POLICY",
    "TRITON_CACHE_DIR",
    "ATREX_FORK_SERVER",
    "ATREX_CONCURRENCY",
    "ATREX_START_AHEAD_DEPTH",
    "ATREX_COMPILE_AHEAD",
)
"""Variables of this process that the child gets, when set (plus ``PYTHONPATH``, after
``PROJECT_ROOT``, and every ``ATREX_SANDBOX_*``). ``ATREX_FORK_SERVER`` (on by default,
``evaluator.forkserver.enabled``) lets a worker turn the fork server off with ``0``;
``ATREX_CONCURRENCY`` is the worker's operators at once (``evaluator.concurrency``),
``ATREX_START_AHEAD_DEPTH`` how many children warm up ahead (``evaluator.cli``);
``ATREX_COMPILE_AHEAD`` ``0`` turns off a campaign round's compiling ahead of its previous
round's specialisations (``evaluator.serve``; on by default), for a before-and-after.
``OMP_NUM_THREADS`` and ``OMP_WAIT_POLICY`` are the host's OpenMP settings for torch on the
CPU (``PASSIVE``: idle threads sleep instead of spinning, which on a machine shared with
other processes, the test suite's two cores say, spends the CPU they wait for); the
evaluator's sandbox passes them on to its children."""
PASSED_PREFIX = "ATREX_SANDBOX_"


class LaunchTimeout(PlatformError):
    """The evaluator's command did not finish in time; its process group was killed."""

    code = "platform:evaluator-timeout"

    def __init__(self, subcommand: str, timeout_s: float) -> None:
        super().__init__(
            f"python -m evaluator {subcommand} did not finish within {timeout_s:.0f} s"
        )
        self.timeout_s = timeout_s


@dataclass(frozen=True)
class Finished:
    """A child that exited: its status and, when captured, its output."""

    returncode: int
    stdout: str = ""
    stderr: str = ""

    def output_tail(self, chars: int = 2000) -> str:
        """The end of what it wrote (stderr, else stdout), for an error message."""
        return (self.stderr or self.stdout or "").strip()[-chars:]


def child_environment(scratch: Path) -> dict[str, str]:
    """The child's whole environment (see the module docstring), ``scratch`` its home."""
    env = {name: os.environ[name] for name in PASSED_VARIABLES if name in os.environ}
    env.update({k: v for k, v in os.environ.items() if k.startswith(PASSED_PREFIX)})
    env["HOME"] = str(scratch)
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("TRITON_CACHE_DIR", str(scratch / "triton-cache"))
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([str(PROJECT_ROOT), *inherited]))
    return env


def evaluator_command(subcommand: str, arguments: Sequence[str], *, python: str = "") -> list[str]:
    """``[python, "-m", "evaluator", subcommand, *arguments]`` (this interpreter by default)."""
    return [python or sys.executable, "-m", "evaluator", subcommand, *map(str, arguments)]


@contextlib.contextmanager
def scratch_folder(subcommand: str, folder: Path | None = None) -> Iterator[Path]:
    """``folder`` (created if missing, kept), else a fresh temporary folder named after the
    subcommand (``atrex-ceilings-...``), removed with everything in it afterwards."""
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
        yield folder
        return
    with tempfile.TemporaryDirectory(prefix=f"atrex-{subcommand}-") as made:
        yield Path(made)


def run_evaluator_command(
    subcommand: str,
    arguments: Sequence[str] = (),
    *,
    scratch: Path,
    timeout_s: float,
    python: str = "",
    input_text: str | None = None,
    log_path: Path | None = None,
    on_poll: Callable[[], None] | None = None,
    poll_s: float = 0.5,
) -> Finished:
    """Run ``python -m evaluator SUBCOMMAND ARGUMENTS`` in ``scratch`` and wait for it.

    ``input_text`` goes to its stdin (else it reads nothing). Without ``log_path`` its
    stdout and stderr are captured and returned; with it they are appended to that file
    (stderr merged) as they are written. ``on_poll`` runs about every ``poll_s`` seconds
    while the child runs; what it raises stops the child and is raised again. Raises
    LaunchTimeout after ``timeout_s`` seconds; OSError when the interpreter cannot start.
    """
    command = evaluator_command(subcommand, arguments, python=python)
    with contextlib.ExitStack() as stack:
        if log_path is not None:
            log = stack.enter_context(log_path.open("ab"))
            streams = {"stdout": log, "stderr": subprocess.STDOUT}
        else:
            streams = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
        process = stack.enter_context(
            subprocess.Popen(  # noqa: S603 - fixed argv, no shell
                command,
                cwd=scratch,
                env=child_environment(scratch),
                stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
                start_new_session=True,
                **streams,
            )
        )
        pending = input_text.encode("utf-8") if input_text is not None else None
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                wait_s = max(0.0, min(poll_s, deadline - time.monotonic()))
                try:
                    stdout, stderr = process.communicate(pending, timeout=wait_s)
                    break
                except subprocess.TimeoutExpired:
                    pending = None  # sent with the first call, which keeps sending it
                if on_poll is not None:
                    on_poll()
                if time.monotonic() >= deadline:
                    raise LaunchTimeout(subcommand, timeout_s)
        except BaseException:
            kill_group(process)
            raise
    return Finished(
        returncode=process.returncode,
        stdout=(stdout or b"").decode("utf-8", errors="replace"),
        stderr=(stderr or b"").decode("utf-8", errors="replace"),
    )


def kill_group(process: subprocess.Popen) -> None:
    """Kill the child's process group (it and whatever it started) and reap the child."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


class ServerGone(PlatformError):
    """The evaluator server exited (or closed its output) before it answered."""

    code = "platform:evaluator-crashed"


class EvaluatorServer:
    """``python -m evaluator SUBCOMMAND ...`` kept running to answer one request after
    another (``serve``: an agent campaign's rounds, see ``evaluator.serve``): a JSON line
    on its stdin, a JSON line back on its stdout. Started with the same environment,
    scratch folder and process group as ``run_evaluator_command``; its stderr is appended
    to ``log_path``. It is told this process's id and is killed (by the kernel) when the
    thread that started it ends; ``close`` ends it at once (use as a context manager)."""

    def __init__(
        self,
        subcommand: str,
        arguments: Sequence[str] = (),
        *,
        scratch: Path,
        log_path: Path,
        python: str = "",
    ) -> None:
        self.subcommand = subcommand
        command = evaluator_command(
            subcommand, [*arguments, "--parent-pid", str(os.getpid())], python=python
        )
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("ab") as log:
            self.process = subprocess.Popen(  # noqa: S603 - fixed argv, no shell
                command,
                cwd=scratch,
                env=child_environment(scratch),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                start_new_session=True,
            )
        self._buffer = b""

    @property
    def alive(self) -> bool:
        """Whether it is still running."""
        return self.process.poll() is None

    def request(
        self,
        message: dict,
        *,
        timeout_s: float,
        on_poll: Callable[[], None] | None = None,
        poll_s: float = 0.5,
    ) -> dict:
        """Send ``message`` and wait for its answer. ``on_poll`` runs about every
        ``poll_s`` seconds meanwhile; what it raises stops the server and is raised again.
        Raises LaunchTimeout (the server is stopped) after ``timeout_s`` seconds, and
        ServerGone when it exits without answering."""
        import json
        import select

        stdin, stdout = self.process.stdin, self.process.stdout
        if stdin is None or stdout is None or stdin.closed:
            raise ServerGone(f"python -m evaluator {self.subcommand} was closed")
        deadline = time.monotonic() + timeout_s
        try:
            try:
                stdin.write((json.dumps(message) + "\n").encode("utf-8"))
                stdin.flush()
            except (BrokenPipeError, ValueError):
                raise ServerGone(self._gone_message()) from None
            descriptor = stdout.fileno()
            while b"\n" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise LaunchTimeout(self.subcommand, timeout_s)
                ready, _, _ = select.select([descriptor], [], [], min(poll_s, left))
                if ready:
                    chunk = os.read(descriptor, 1 << 16)
                    if not chunk:
                        raise ServerGone(self._gone_message())
                    self._buffer += chunk
                    continue
                if on_poll is not None:
                    on_poll()
        except BaseException:
            self.close(kill=True)
            raise
        line, _, self._buffer = self._buffer.partition(b"\n")
        try:
            return json.loads(line)
        except ValueError:
            self.close(kill=True)
            raise ServerGone(
                f"python -m evaluator {self.subcommand} answered {line[:200]!r}"
            ) from None

    def _gone_message(self) -> str:
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        return (
            f"python -m evaluator {self.subcommand} stopped without answering "
            f"(exit code {self.process.returncode})"
        )

    def close(self, *, kill: bool = False, wait_s: float = 10.0) -> None:
        """End it: its stdin is closed (it stops its waiting child and exits); if it is
        still running after ``wait_s`` seconds, or at once with ``kill``, its process
        group is killed (its sandboxed children die with it)."""
        if self.process.stdin is not None:
            with contextlib.suppress(OSError, ValueError):
                self.process.stdin.close()
        if not kill:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=wait_s)
        if self.process.poll() is None:
            kill_group(self.process)
        if self.process.stdout is not None:
            self.process.stdout.close()

    def __enter__(self) -> EvaluatorServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
