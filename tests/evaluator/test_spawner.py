"""Children outlive the thread that asked for them (evaluator.spawner): a child that asks to
die with its parent (PR_SET_PDEATHSIG, as the sandbox and the fork server do) is killed by
Linux when the *thread* that forked it ends."""

from __future__ import annotations

import ctypes
import signal
import subprocess
import sys
import threading
import time

from evaluator import spawner

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _start(via_spawner: bool) -> subprocess.Popen[bytes]:
    """A sleeping child started from a thread that then ends."""
    started: list[subprocess.Popen[bytes]] = []

    def popen() -> subprocess.Popen[bytes]:
        return subprocess.Popen(  # noqa: S603 - fixed argv
            [sys.executable, "-c", "import time; time.sleep(30)"],
            preexec_fn=_die_with_parent,  # noqa: PLW1509 - the behaviour under test
        )

    def short_lived() -> None:
        started.append(spawner.call(popen) if via_spawner else popen())

    worker = threading.Thread(target=short_lived)
    worker.start()
    worker.join()
    return started[0]


def _alive_after(child: subprocess.Popen[bytes], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if child.poll() is not None:
            return False
        time.sleep(0.05)
    return True


def test_a_child_started_through_the_spawner_outlives_the_thread_that_asked():
    child = _start(via_spawner=True)
    try:
        assert _alive_after(child, 1.0), f"killed: {child.returncode}"
    finally:
        child.kill()
        child.wait()


def test_without_the_spawner_the_thread_ending_kills_the_child():
    # The mechanism the spawner exists for: without it this test's twin above would fail.
    child = _start(via_spawner=False)
    try:
        assert not _alive_after(child, 5.0)
        assert child.returncode == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_exceptions_come_back_to_the_caller_and_calls_from_the_thread_run_at_once():
    def fails() -> None:
        raise ValueError("no such bundle")

    try:
        spawner.call(fails)
    except ValueError as exc:
        assert str(exc) == "no such bundle"
    else:
        raise AssertionError("the exception was lost")
    assert spawner.call(lambda: spawner.call(lambda: threading.current_thread().name)) == (
        "atrex-spawner"
    )
