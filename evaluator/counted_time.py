"""Counted time: what a region cost the thread that ran it, whatever else the host ran.

On a loaded host a process is taken off the CPU at random points, so the wall time of a
region holds waits for a CPU that have nothing to do with the code in it: on a loaded
2-core CI host that made an honest Triton kernel look like a fallback (own share 0.64; with
four busy loops on two cores, one smoke-shape call in six under 0.8, as low as 0.32), and
made the same calls look several times faster timed than watched, or the reverse.

Counted time is the calling thread's wall time less the time it was runnable but waiting
for a CPU (Linux's ``/proc/thread-self/schedstat``): its own CPU time plus its waits for
anything but a CPU. So other processes' load does not move it, and everything else the
wall clock counted still counts: a sleep, a join on a helper thread doing the work, a pipe
or a socket to work done elsewhere are waits of the region (the thread's CPU time alone,
``time.thread_time_ns``, would miss them). Threads running beside the calling thread are
not added (the process's CPU time would add them: in the evaluation child another thread,
by all signs PyTorch's OpenMP worker spinning on after the harness's own checks, ran
4-10 ms inside each call). Where schedstat cannot be read, counted time is the wall time.

Used by the CPU fallback monitor (``evaluator.fallback_cpu``: every share, and the watched
calls' time) and the CPU timer (``evaluator.timing``: the timed calls' counted time), so
that the watched-against-timed check (``evaluator.measure.unwatched_path_error``) compares
like with like on a loaded host.
"""

from __future__ import annotations

import contextlib
import os
import time

# Bound at import, before any candidate code runs: a candidate that replaces
# ``time.thread_time_ns`` or ``os.pread`` changes nothing here (and the integrity guard
# reports it).
_wall_ns = time.perf_counter_ns
_thread_ns = time.thread_time_ns
_open = os.open
_close = os.close
_fstat = os.fstat
_pread = os.pread

SCHEDSTAT = "/proc/thread-self/schedstat"
"""The calling thread's scheduler statistics (Linux): CPU time, time runnable but waiting
for a CPU (ns), time slices."""

Mark = tuple[int, int, int | None]
"""(wall ns, thread CPU ns, run-queue wait ns or None) at a point in time."""


class CountedClock:
    """Counted time of regions run by the thread that opened it (see the module
    docstring); a context manager that holds the thread's schedstat file open.

    ``mark`` and ``since`` take ``enclose``: with it, the run-delay reads enclose the
    clocks', so their cost, and a CPU wait between them, fall outside the region (a launch
    of the bundle's own kernels, or a timed call, is never made longer); without it, inside
    (a PyTorch compute call is never made shorter)."""

    def __init__(self) -> None:
        self._identity: tuple[int, int] | None = None
        try:
            self._schedstat: int | None = _open(SCHEDSTAT, os.O_RDONLY)
            status = _fstat(self._schedstat)
            self._identity = (status.st_dev, status.st_ino)
        except OSError:
            self._schedstat = None

    @property
    def reads_schedstat(self) -> bool:
        """Whether waits for a CPU are taken off (else counted time is wall time)."""
        return self._run_delay_ns() is not None

    def _run_delay_ns(self) -> int | None:
        if self._schedstat is None:
            return None
        try:
            # The candidate could close the descriptor and open a file of its own under
            # the same number: read only the file that was opened (else: the wall time).
            status = _fstat(self._schedstat)
            if (status.st_dev, status.st_ino) != self._identity:
                return None
            return int(_pread(self._schedstat, 256, 0).split()[1])
        except (OSError, ValueError, IndexError):
            return None

    def mark(self, *, enclose: bool = True) -> Mark:
        """Now, for ``since`` (with the same ``enclose``)."""
        if not enclose:
            wall = _wall_ns()
            return wall, _thread_ns(), self._run_delay_ns()
        delay = self._run_delay_ns()
        thread = _thread_ns()
        return _wall_ns(), thread, delay

    def since(self, mark: Mark, *, enclose: bool = True) -> tuple[float, float, float]:
        """(Counted, wall, waited) seconds since ``mark``; waited: for anything but a CPU."""
        wall_0, thread_0, delay_0 = mark
        if enclose:
            wall_ns = _wall_ns() - wall_0
            thread_ns = _thread_ns() - thread_0
            delay_1 = self._run_delay_ns()
        else:
            delay_1 = self._run_delay_ns()
            thread_ns = _thread_ns() - thread_0
            wall_ns = _wall_ns() - wall_0
        if delay_0 is None or delay_1 is None:
            return wall_ns * 1e-9, wall_ns * 1e-9, 0.0
        counted_ns = max(thread_ns, wall_ns - (delay_1 - delay_0))
        return counted_ns * 1e-9, wall_ns * 1e-9, (counted_ns - thread_ns) * 1e-9

    def close(self) -> None:
        """Close the schedstat file (counted time is wall time from then on)."""
        if self._schedstat is not None:
            with contextlib.suppress(OSError):  # closed by the candidate already
                _close(self._schedstat)
            self._schedstat = None

    def __enter__(self) -> CountedClock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
