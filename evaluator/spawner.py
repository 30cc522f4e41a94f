"""Every evaluation child, and every fork server, started from one long-lived thread.

A child asks to be killed with the process that started it (``PR_SET_PDEATHSIG`` in the
sandbox, and the fork server for itself), so that no child outlives a runner that died.
Linux sends that signal when the *thread* that forked the child ends, not its process:
a child started from a thread that then ends is killed at once, mid-measurement. A
concurrent run (``evaluator.concurrency``) evaluates each operator in a thread of its own,
and that thread starts the next operator's child ahead, and (through ``forkserver``) may
start the process-wide fork server that forks every later child; when the operator's
thread ended, everything those children were doing was killed (the H200, session 14: 334
of 440 shapes "killed (SIGKILL)"). So processes are started here, in one daemon thread
that lives as long as the process: a child dies with the runner, never with a thread of
it. Stdlib only.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

T = TypeVar("T")

_calls: queue.SimpleQueue[tuple[Callable[[], object], Future[object]]] = queue.SimpleQueue()
_thread: threading.Thread | None = None
_lock = threading.Lock()


def _serve() -> None:
    while True:
        call, future = _calls.get()
        if not future.set_running_or_notify_cancel():
            continue
        try:
            future.set_result(call())
        except BaseException as exc:  # raised again in the caller's thread
            future.set_exception(exc)


def thread() -> threading.Thread:
    """The spawner thread (started on first use)."""
    global _thread
    with _lock:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_serve, name="atrex-spawner", daemon=True)
            _thread.start()
        return _thread


def call(start: Callable[[], T]) -> T:
    """``start()`` run in the spawner thread (at once when already there); its result, or
    its exception raised here."""
    if threading.current_thread() is thread():
        return start()
    future: Future[object] = Future()
    _calls.put((start, future))
    return future.result()  # type: ignore[return-value]
