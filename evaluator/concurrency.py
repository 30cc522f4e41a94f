"""Operator-level concurrency inside one evaluation: several operators' children at once
on the one device for their correctness checks, the timing exclusive (stdlib only).

``python -m evaluator run --concurrency N`` (``ATREX_CONCURRENCY``; default 1, the run
one operator at a time) keeps up to N operators' children alive at once (``OperatorSlots``):
their imports, validation variants, correctness checks and fallback watching overlap, and
most of that time leaves the GPU idle. Timing does not overlap anything:

* A child that reaches a shape's timing asks the runner for the **timing window**
  (``timing_request``, signed like every record) and waits. The runner (``TimingWindow``)
  sends every other running child ``pause`` on its job pipe, which stays open as the
  child's control pipe; each child acknowledges (``paused``) at its next safe point
  (``TimingGate.checkpoint``: before each validation variant and each shape), after its
  device work has finished, and then waits for ``resume``. Only when every other child is
  paused (or itself waiting for the window, or gone) does the runner send ``grant``; the
  child times the shape and says ``timing_done``; the next waiting child gets the window,
  or the paused ones are resumed.
* A figure that other children could distort is re-taken alone: the grant says whether
  another child ran while this shape was checked (``shared``); when the watched-against-
  timed check (``evaluator.measure.unwatched_path_error``, the one implementation) fires
  on such a shape, the watched figure is measured again inside the window before the
  shape is judged (``watch_confirmed`` in the shape's record).

Children started ahead of their turn still warm up (torch, the CUDA context) during a
window, as they do during a measurement at N=1. Each child alive at once runs as its own
sandbox user (``evaluator.sandbox``: ``ATREX_SANDBOX_MORE_USERS``); ``check_users`` says
so plainly when N exceeds them.

The control frames from the runner are unsigned: only the runner holds the pipe's write
end. A candidate (it shares the child's process) that reads them itself can only stall its
own operator: a paused child that is not acknowledged in time is stopped
(``SlotControl.overdue``), and one granted the window must report within the shape time
limit like any other.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from evaluator.frames import FrameReader, write_frame

CONCURRENCY_ENV = "ATREX_CONCURRENCY"

# Bound at import (the child imports this module before the candidate exists).
_monotonic = time.monotonic
_select = select.select
_os_read = os.read


def concurrency_from(value: int | str | None, environ: Mapping[str, str] | None = None) -> int:
    """The run's concurrency: ``value`` if given, else ``ATREX_CONCURRENCY``, else 1.
    Raises ValueError for anything but a whole number of at least 1."""
    environ = os.environ if environ is None else environ
    raw = value if value is not None else (environ.get(CONCURRENCY_ENV, "").strip() or 1)
    try:
        number = int(raw)
    except (TypeError, ValueError):
        raise ValueError(f"concurrency {raw!r} is not a whole number") from None
    if number < 1:
        raise ValueError(f"concurrency must be at least 1, not {number}")
    return number


def check_users(sandbox: Any, concurrency: int) -> None:
    """Raise ``SandboxError`` when ``concurrency`` children cannot each run as a sandbox
    user of their own (``sandbox.users``)."""
    if concurrency <= sandbox.users:
        return
    from evaluator.sandbox import SandboxError

    more = len(getattr(sandbox, "more", ()) or ())
    raise SandboxError(
        f"--concurrency {concurrency} needs {concurrency} sandbox users (one for each "
        f"child alive at once), and this worker has {sandbox.users}: the sandbox user, "
        f"ATREX_SANDBOX_SECOND_USER, ATREX_SANDBOX_THIRD_USER and {more} in "
        f"ATREX_SANDBOX_MORE_USERS"
        + (
            f" ({why})"
            if (
                why := sandbox.no_overlap_reason
                or sandbox.no_third_reason
                or sandbox.no_more_reason
            )
            else ""
        )  # fmt: skip
        + f". List {concurrency - sandbox.users} more unprivileged uids in "
        "ATREX_SANDBOX_MORE_USERS (e.g. 65531,65530; one more lets the next operator's "
        "child start ahead), or lower the concurrency."
    )


# --------------------------------------------------------------------------- child side


class GateClosed(RuntimeError):
    """The runner closed the control pipe (it is gone): nothing more may run."""


class TimingGate:
    """The child's end of the timing window: its safe points and its windows.

    ``control_fd`` is the job pipe, kept open; ``send`` the signed result channel's send;
    ``sync`` waits for the device's work (so a paused child leaves nothing running);
    ``release`` hands the device memory this child holds but does not use back to the
    device (PyTorch's cached blocks), at each shape and each pause, so that a shape of
    another operator does not run out of memory that this one merely keeps."""

    def __init__(
        self,
        control_fd: int,
        send: Callable[[Mapping[str, Any]], None],
        sync: Callable[[], None],
        release: Callable[[], None] = lambda: None,
    ) -> None:
        self._fd = control_fd
        self._send = send
        self._sync = sync
        self.release = release
        """Hand this child's cached device memory back (also at each shape and pause)."""
        self._reader = FrameReader()
        self._pending: list[dict[str, Any]] = []
        self._since = _monotonic()

    def _frame(self, *, block: bool) -> dict[str, Any] | None:
        while not self._pending:
            if not block and not _select([self._fd], [], [], 0)[0]:
                return None
            data = _os_read(self._fd, 4096)
            if not data:
                raise GateClosed("the runner closed the control pipe")
            self._pending.extend(self._reader.feed(data))
        return self._pending.pop(0)

    def _wait_for(self, control: str) -> dict[str, Any]:
        while True:
            frame = self._frame(block=True) or {}
            if frame.get("control") == control:
                return frame

    def begin(self) -> None:
        """Wait for the runner's word before anything of the candidate's runs (the
        window may be held by another child just now)."""
        self._wait_for("resume")
        self._since = _monotonic()

    def checkpoint(self) -> None:
        """A safe point between variants and shapes: the memory the last one left cached
        is released; if the runner asked this child to pause, finish the device's work,
        say so and wait until it may go on. What follows is a new shape's checks."""
        self.release()
        self.safe_point()
        self._since = _monotonic()

    def safe_point(self) -> None:
        """A safe point inside a shape's checks (``evaluator.correctness.check_shape``:
        before each trial after the first and before each reference call), where nothing
        of the candidate's runs: pause here if asked. The shape's checks go on after it,
        so whether another child ran beside them is still counted from their start. Without
        these a window waited for the longest shape of every other child (up to 5.2 s on the
        H200 for unified_attention's and block_scaled_mm's) while the children already
        paused sat idle."""
        while (frame := self._frame(block=False)) is not None:
            if frame.get("control") == "pause":
                self._sync()
                self.release()
                self._send({"event": "paused"})
                self._wait_for("resume")

    @contextlib.contextmanager
    def window(self, shape_id: str, purpose: str = "timing") -> Iterator[bool]:
        """Hold the timing window for one shape: yields whether another child ran since
        this shape's checks began (its watched figures may then be distorted). ``purpose``
        names a window held for something else than timing (``alone``: a shape's checks
        run again with every other child paused), for the digest."""
        request = {"event": "timing_request", "shape_id": shape_id, "since": self._since}
        self._send(request if purpose == "timing" else {**request, "purpose": purpose})
        grant = self._wait_for("grant")  # a pause sent meanwhile is moot: this child waits
        try:
            yield bool(grant.get("shared"))
        finally:
            with contextlib.suppress(Exception):  # a broken context: released all the same
                self._sync()
            self._send({"event": "timing_done", "shape_id": shape_id})


# --------------------------------------------------------------------------- runner side

_QUIET = ("paused", "waiting", "gone")
"""States in which a child runs nothing: another may time. A ``starting`` child (attached,
warming up its harness until its ``hello``) is not quiet: no window opens while it uses the
host and the device, and it cannot be paused yet (a pause must not come before its job on
the pipe); it waits for its first ``resume`` before the candidate's code runs."""


class _Slot:
    def __init__(self, operator: str, fd: int, now: float) -> None:
        self.operator = operator
        self.fd = fd
        self.state = "starting"  # starting | running | pausing | paused | waiting | timing | gone
        self.since = now
        self.active: list[list[float | None]] = [[now, None]]
        """Spans (start, end or None) in which the child ran (not paused, not waiting)."""
        self.pause_sent: float | None = None
        self.request: dict[str, Any] = {}

    def set(self, state: str, now: float) -> None:
        was_active = self.state not in _QUIET
        self.state = state
        if was_active and state in _QUIET:
            self.active[-1][1] = now
        elif not was_active and state not in _QUIET:
            self.active.append([now, None])


class SlotControl:
    """What the runner's reader of one child (``evaluator.runner._follow``) asks the
    window: whether the child is idle by the runner's doing (its silence is no timeout)
    and whether it failed to pause in time."""

    def __init__(self, window: TimingWindow, operator: str) -> None:
        self.window = window
        self.operator = operator

    def idle(self) -> bool:
        """The child is paused or waiting for the window."""
        return self.window.state(self.operator) in ("paused", "waiting")

    def overdue(self, limit_s: float) -> str | None:
        """Why the child is stopped, when it was asked to pause more than ``limit_s`` ago
        and did not."""
        return self.window.overdue(self.operator, limit_s)


class TimingWindow:
    """The runner's timing window over the children alive at once: one holder, the others
    paused while it times (see the module docstring). Thread-safe; nothing here blocks."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._slots: dict[str, _Slot] = {}
        self._queue: list[str] = []
        self._holder: str | None = None
        self.origin = _monotonic()
        self.windows: list[dict[str, Any]] = []
        self.pauses: list[dict[str, Any]] = []

    def attach(self, operator: str, job_write: int, job: dict[str, Any]) -> dict[str, Any]:
        """Register ``operator``'s child before its job is sent (the job asks it to keep
        its job pipe as the control pipe); the keyword arguments for
        ``run_started_child``. Until its ``hello`` it is ``starting`` (see ``_QUIET``): it
        runs no candidate code before the runner's first ``resume`` (``TimingGate.begin``)."""
        job["timing_window"] = True
        with self._lock:
            self._slots[operator] = _Slot(operator, os.dup(job_write), _monotonic())
        return {
            "on_event": lambda message: self.on_event(operator, message),
            "slot": SlotControl(self, operator),
        }

    def detach(self, operator: str) -> None:
        """The child is gone: it holds nothing and waits for nothing."""
        with self._lock:
            slot = self._slots.get(operator)
            if slot is None or slot.state == "gone":
                return
            self._quiet(slot, "gone")
            os.close(slot.fd)
            self._advance()

    def state(self, operator: str) -> str:
        """The child's state (``gone`` for one not attached)."""
        slot = self._slots.get(operator)
        return slot.state if slot is not None else "gone"

    def overdue(self, operator: str, limit_s: float) -> str | None:
        slot = self._slots.get(operator)
        if slot is None or slot.state != "pausing" or slot.pause_sent is None:
            return None
        if _monotonic() - slot.pause_sent <= limit_s:
            return None
        return (
            f"the evaluation process did not pause for another operator's timing within "
            f"{limit_s:.0f} s (its control pipe was not read by the harness); it was stopped"
        )

    def on_event(self, operator: str, message: Mapping[str, Any]) -> None:
        """A frame from ``operator``'s child (all of them pass here first)."""
        event = message.get("event")
        if event not in ("hello", "timing_request", "paused", "timing_done"):
            return
        with self._lock:
            slot = self._slots.get(operator)
            if slot is None or slot.state == "gone":
                return
            now = _monotonic()
            if event == "hello" and slot.state == "starting":
                # It has read its job and waits for a word before it imports the
                # candidate: to go on now, or once the window is free.
                if self._holder is None and not self._queue:
                    self._write(slot, "resume")
                    slot.set("running", now)
                else:
                    slot.set("paused", now)
                    self.pauses.append(
                        {"operator": operator, "asked": self._at(now), "paused": self._at(now)}
                    )
            elif event == "paused" and slot.state == "pausing":
                asked = self._at(slot.pause_sent)
                self.pauses.append({"operator": operator, "asked": asked, "paused": self._at(now)})
                self._quiet(slot, "paused")
            elif event == "timing_request" and slot.state in ("running", "pausing", "timing"):
                if self._holder == operator:  # its last window was never said to be done
                    self._release(slot, now)
                since = message.get("since")
                slot.request = {
                    "operator": operator,
                    "shape_id": str(message.get("shape_id")),
                    "purpose": str(message.get("purpose") or "timing"),
                    "since": float(since) if isinstance(since, int | float) else slot.since,
                    "requested": now,
                }
                self._quiet(slot, "waiting")
                self._queue.append(operator)
            elif event == "timing_done" and self._holder == operator:
                self._release(slot, now)
            self._advance()

    def _quiet(self, slot: _Slot, state: str) -> None:
        now = _monotonic()
        if slot.operator == self._holder:
            self._release(slot, now)
        if slot.operator in self._queue:
            self._queue.remove(slot.operator)
        slot.set(state, now)
        slot.pause_sent = None

    def _release(self, slot: _Slot, now: float) -> None:
        self._holder = None
        if self.windows and self.windows[-1]["released"] is None:
            self.windows[-1]["released"] = self._at(now)
        if slot.state == "timing":
            slot.set("running", now)

    def _write(self, slot: _Slot, control: str, **fields: Any) -> bool:
        try:
            write_frame(slot.fd, {"control": control, **fields})
            return True
        except OSError:  # the child is gone; its reader detaches it
            return False

    def _shared(self, slot: _Slot, since: float, now: float) -> bool:
        """Whether another child ran at some moment between ``since`` and ``now``."""
        for other in self._slots.values():
            if other is slot:
                continue
            for start, end in other.active:
                if start is not None and start <= now and (end is None or end >= since):
                    return True
        return False

    def _advance(self) -> None:
        now = _monotonic()
        if self._holder is None and self._queue:
            head = self._slots[self._queue[0]]
            for other in self._slots.values():
                if other is not head and other.state == "running":
                    if self._write(other, "pause"):
                        other.state, other.pause_sent = "pausing", now
            if all(o is head or o.state in _QUIET for o in self._slots.values()):
                self._queue.pop(0)
                shared = self._shared(head, head.request["since"], now)
                head.set("timing", now)
                self._holder = head.operator
                self.windows.append(
                    {
                        "operator": head.operator,
                        "shape_id": head.request["shape_id"],
                        "requested": self._at(head.request["requested"]),
                        "granted": self._at(now),
                        "released": None,
                        "shared": shared,
                    }
                )
                if head.request["purpose"] != "timing":
                    self.windows[-1]["purpose"] = head.request["purpose"][:20]
                self._write(head, "grant", shared=shared)
        if self._holder is None and not self._queue:
            for other in self._slots.values():
                if other.state == "paused":
                    for entry in reversed(self.pauses):
                        if entry["operator"] == other.operator and "resumed" not in entry:
                            entry["resumed"] = self._at(now)
                            break
                    self._write(other, "resume")
                    other.set("running", now)

    def _at(self, moment: float | None) -> float | None:
        return None if moment is None else round(moment - self.origin, 6)

    def digest(self, slots: int) -> dict[str, Any]:
        """What the windows did, for the environment digest: the slots, each window
        (operator, shape, requested, granted and released in seconds from
        ``origin_monotonic``, ``shared``), each pause (asked, paused, resumed), the
        seconds held exclusively and waited for."""
        with self._lock:
            windows = [dict(w) for w in self.windows]
            pauses = [dict(p) for p in self.pauses]
        held = sum((w["released"] or w["granted"]) - w["granted"] for w in windows)
        waited = sum(w["granted"] - w["requested"] for w in windows)
        return {
            "slots": slots,
            "origin_monotonic": self.origin,
            "windows": windows,
            "pauses": pauses,
            "exclusive_s": round(held, 3),
            "waited_s": round(waited, 3),
        }


class Locked:
    """Calls of ``target``'s methods one at a time (the worker's reference pool and
    timing cache, shared by the slots' threads)."""

    def __init__(self, target: Any, lock: threading.Lock | None = None) -> None:
        self._target = target
        self._call_lock = lock or threading.Lock()

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if not callable(value):
            return value

        def locked(*args: Any, **kwargs: Any) -> Any:
            with self._call_lock:
                return value(*args, **kwargs)

        return locked


class OperatorSlots:
    """Evaluates the operators in their order, up to ``slots`` at once.

    With one slot each operator is evaluated in the calling thread, one after the other,
    as without concurrency; with more, each in a thread of its own, the next one
    dispatched once the previous one's child has its job (so that the child started
    ahead for it is the one it takes), the children sharing a ``TimingWindow``. Entries
    are kept in the operators' order; ``checkpoint`` is called (one at a time) whenever
    an operator has finished and others remain."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self.window = TimingWindow() if slots > 1 else None
        self._sent: dict[str, threading.Event] = {}

    def shared(self, target: Any) -> Any:
        """``target`` (the worker's reference pool or timing cache, or None), its calls one
        at a time when several slots' threads share it."""
        return target if self.window is None or target is None else Locked(target)

    def on_sent(self, operator: str, then: Callable[[], None]) -> Callable[[], None]:
        """What runs once ``operator``'s child has its job: ``then`` (the next child started
        ahead), and, with several slots, the next operator's dispatch."""
        if self.window is None:
            return then
        sent = self._sent[operator]

        def both() -> None:
            then()
            sent.set()

        return both

    def run(
        self,
        operators: list[str],
        evaluate: Callable[..., dict[str, Any]],
        *,
        entries: list[dict[str, Any]],
        checkpoint: Callable[[], None],
        order: list[str] | None = None,
    ) -> None:
        """``evaluate(operator)`` for each operator, appending each entry to ``entries``;
        with several slots ``evaluate`` passes ``on_sent`` on as its child's and
        ``window`` to its child. ``operators`` is the order of dispatch; ``entries`` are
        kept in ``order`` (default: that order)."""
        if self.window is None:
            for operator in operators:
                if entries:
                    checkpoint()
                entries.append(evaluate(operator))
            return
        order_of = {operator: index for index, operator in enumerate(order or operators)}
        lock = threading.Lock()
        free = threading.Semaphore(self.slots)
        failures: list[BaseException] = []
        threads: list[threading.Thread] = []

        def work(operator: str, sent: threading.Event) -> None:
            try:
                entry = evaluate(operator)
                with lock:
                    entries.append(entry)
                    entries.sort(key=lambda e: order_of[e["operator"]])
                    if len(entries) < len(operators):
                        checkpoint()
            except BaseException as exc:  # raised again in the calling thread
                failures.append(exc)
            finally:
                sent.set()
                free.release()

        for operator in operators:
            free.acquire()
            if failures:
                free.release()
                break
            sent = self._sent[operator] = threading.Event()
            thread = threading.Thread(
                target=work, args=(operator, sent), name=f"operator-{operator}"
            )
            thread.start()
            threads.append(thread)
            sent.wait()
        for thread in threads:
            thread.join()
        if failures:
            raise failures[0]
