"""Timing of one callable with adaptive repetitions: a CPU timer and a CUDA timer.

Both warm up, then time at least ``min_reps`` calls and keep going until the standard
error of the median is under ``target_rel_se`` of the median or the time budget is spent.
The median is what is reported, so its standard error is what must be small; it is
estimated from the interquartile range (``median_standard_error``), which the rare slow
call of a busy machine does not inflate as it inflates the standard deviation.
The CUDA timer flushes L2 before every call (resets lines marked persisting, then writes
a buffer larger than L2),
synchronises the whole device around every call, times with CUDA events and cross-
checks with the host clock (work launched on other streams is invisible to events on
the current stream, but not to a device-wide synchronise).

The clocks, the synchronise and the event class are bound when this module is imported,
which the evaluation child does before it imports the candidate: a candidate that
replaces ``time.perf_counter_ns`` or ``torch.cuda.Event`` afterwards does not change
what is read here (and the child's integrity guard reports it). ``measure`` takes
``before_call`` and ``after_call`` hooks that run outside the timed region, around every
call: the child uses them to give each call fresh inputs and to check each call.
"""

from __future__ import annotations

import bisect
import ctypes
import math
import statistics
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from evaluator.counted_time import CountedClock
from evaluator.figures import duration_ms
from evaluator.measurement_policy import MIN_REPS, TARGET_REL_SE

DEFAULT_BUDGET_S = {"cpu": 2.0, "cuda": 1.0}
MAX_REPS = 100_000
L2_FLUSH_BYTES = 256 * 1024 * 1024
"""Larger than the L2 of any supported GPU (H100/H200: 50 MB)."""
LAUNCH_COVER_CYCLES = 400_000
"""A GPU spin of about 200 us at 2 GHz queued after the flush (see CudaTimer.time_once)."""
MAX_LAUNCH_COVER_CYCLES = 16 * LAUNCH_COVER_CYCLES
"""The longest the cover grows to (about 3.2 ms at 2 GHz): enough for tens of launches
from Python on a slow host; host work longer than that shows in the time (and a warning)."""
COVER_MARGIN = 0.8
"""A call is covered when the host queued it within this share of the GPU work before it."""

# Bound once, before any candidate code runs (see the module docstring).
_perf_counter = time.perf_counter
_perf_counter_ns = time.perf_counter_ns
_cuda_synchronize = torch.cuda.synchronize
_CudaEvent = torch.cuda.Event
_NO_HOOK: Callable[[], None] = lambda: None  # noqa: E731
CUDART_NAMES = ("libcudart.so.12", "libcudart.so.13", "libcudart.so.11.0", "libcudart.so")


def persisting_l2_reset() -> Callable[[], Any] | None:
    """``cudaCtxResetPersistingL2Cache`` from the CUDA runtime torch loaded, or None.

    Lines a kernel marked persisting (an access policy window) survive the L2 flush, which
    only writes normal lines; resetting them before each timed call makes the flush evict
    them too.
    """
    for name in CUDART_NAMES:
        try:
            function = ctypes.CDLL(name).cudaCtxResetPersistingL2Cache
        except (OSError, AttributeError):
            continue
        function.restype = ctypes.c_int
        return function
    return None


@dataclass
class TimingResult:
    """Per-call times of one callable: median, standard error, repetitions."""

    median_s: float
    std_error_s: float
    reps: int
    samples_s: list[float] = field(repr=False, default_factory=list)
    host_median_s: float | None = None
    warnings: list[str] = field(default_factory=list)
    counted_median_s: float | None = None
    """CPU: the median timed call's counted time (``evaluator.counted_time``: the calling
    thread's wall time less its waits for a CPU), which a loaded host does not inflate; it
    is compared with the watched calls' (``evaluator.measure.unwatched_path_error``). The
    score keeps the wall time (``median_s``). None on CUDA."""


IQR_PER_SIGMA = 1.349
"""Interquartile range of a normal distribution, in standard deviations."""
MEDIAN_SE_PER_SIGMA = math.sqrt(math.pi / 2)
"""Standard error of a sample median, per sigma/sqrt(n), for a normal distribution."""


def _quantile(ordered: list[float], q: float) -> float:
    """The q-quantile of sorted values (linear interpolation between closest ranks)."""
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def median_standard_error(ordered: list[float]) -> float:
    """Standard error of the median of sorted samples, robustly: the interquartile range
    as the spread (IQR / 1.349 is sigma for a normal distribution), times sqrt(pi/2) /
    sqrt(n). Infinite for fewer than two samples."""
    count = len(ordered)
    if count < 2:
        return math.inf
    sigma = (_quantile(ordered, 0.75) - _quantile(ordered, 0.25)) / IQR_PER_SIGMA
    return MEDIAN_SE_PER_SIGMA * sigma / math.sqrt(count)


def summarize_samples(samples: list[float]) -> tuple[float, float]:
    """(median, standard error of the median) of per-call times."""
    ordered = sorted(samples)
    return _quantile(ordered, 0.5), median_standard_error(ordered)


OTHER_STREAM_SLACK_S = 100e-6
"""How much longer than the current stream's time a call's all-streams time (less the
synchronise round trip) may be before work outside the current stream is suspected; the
excess must also exceed the current stream's time itself."""


def unseen_stream_excess(
    *, all_streams_s: float, current_s: float, round_trip_s: float
) -> float | None:
    """Seconds of work outside the current stream that the device-wide synchronise saw
    and the current stream's events did not, or None when there is no sign of any.

    The all-streams time runs to an event recorded after the host's synchronise returned,
    so it holds that round trip (the host waking up, the last event launched): about
    100 us on a busy host, varying from call to call. Compared raw with the current
    stream's time it made honest single-stream kernels look like hidden work (seven shapes
    of 225 per Triton v1 run on the H200, 2026-12-01, each then timed ~100 us slower), so
    the round trip measured on empty calls is taken off first."""
    excess = all_streams_s - round_trip_s - current_s
    return excess if excess > max(OTHER_STREAM_SLACK_S, current_s) else None


class _RunningStats:
    """A sorted copy of the samples, so each convergence check is cheap."""

    def __init__(self) -> None:
        self.sorted: list[float] = []

    def add(self, value: float) -> None:
        bisect.insort(self.sorted, value)

    def converged(self, *, min_reps: int, target_rel_se: float) -> bool:
        if len(self.sorted) < max(2, min_reps):
            return False
        median = _quantile(self.sorted, 0.5)
        return median > 0 and median_standard_error(self.sorted) <= target_rel_se * median


class Timer(ABC):
    """Times a zero-argument callable (which runs the operator once)."""

    device_type: str = "cpu"
    last_uncovered: bool = False
    """The last call's time may hold host time (CUDA: see CudaTimer); it is not counted."""

    def __init__(
        self,
        *,
        min_reps: int = MIN_REPS,
        max_reps: int = MAX_REPS,
        target_rel_se: float = TARGET_REL_SE,
    ) -> None:
        self.min_reps = min_reps
        self.max_reps = max_reps
        self.target_rel_se = target_rel_se

    @abstractmethod
    def time_once(self, fn: Callable[[], Any]) -> tuple[float, float]:
        """(device seconds, host seconds) of one call, prepared as the timer requires."""

    def measure(
        self,
        fn: Callable[[], Any],
        *,
        budget_s: float | None = None,
        warmup: int = 2,
        before_call: Callable[[], None] | None = None,
        after_call: Callable[[], None] | None = None,
        all_streams: bool = False,
    ) -> TimingResult:
        """Warm up, then time repeatedly until converged or the budget is spent.

        ``before_call`` and ``after_call`` run around every call (warm-up included),
        outside the timed region; an exception from either ends the measurement.
        ``all_streams`` (CUDA) times the work of every stream of the device; on the CPU
        the host clock sees everything anyway.
        """
        budget = DEFAULT_BUDGET_S[self.device_type] if budget_s is None else budget_s
        before = before_call or _NO_HOOK
        after = after_call or _NO_HOOK
        started = _perf_counter()
        for _ in range(max(1, warmup)):
            before()
            self.time_once(fn)
            after()
            if _perf_counter() - started > 0.25 * budget:
                break
        samples: list[float] = []
        host_samples: list[float] = []
        stats = _RunningStats()
        deadline = _perf_counter() + budget
        while len(samples) < self.max_reps:
            before()
            self.last_uncovered = False
            device_s, host_s = self.time_once(fn)
            after()
            if self.last_uncovered:
                continue  # its time holds host time; the cover has grown for the next
            samples.append(device_s)
            host_samples.append(host_s)
            stats.add(device_s)
            if stats.converged(min_reps=self.min_reps, target_rel_se=self.target_rel_se):
                break
            if len(samples) >= self.min_reps and _perf_counter() > deadline:
                break
        return self._result(samples, host_samples)

    def _result(self, samples: list[float], host_samples: list[float]) -> TimingResult:
        median, std_error = summarize_samples(samples)
        return TimingResult(
            median_s=median,
            std_error_s=std_error,
            reps=len(samples),
            samples_s=samples,
            host_median_s=statistics.median(host_samples),
        )


class CpuTimer(Timer):
    """Wall-clock timing with ``time.perf_counter_ns`` (device time = host time); each
    call's counted time (``evaluator.counted_time``) is kept beside it."""

    device_type = "cpu"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._clock: CountedClock | None = None
        self.counted_s: list[float] = []
        """Counted seconds of each call of the last ``measure`` (warm-up included)."""

    def time_once(self, fn: Callable[[], Any]) -> tuple[float, float]:
        """Seconds of one call (wall); its counted seconds go to ``counted_s``."""
        clock = self._clock
        mark = clock.mark() if clock is not None else None
        start = _perf_counter_ns()  # the wall clock innermost: the counted reads stay out
        fn()
        elapsed = (_perf_counter_ns() - start) * 1e-9
        if clock is not None and mark is not None:
            self.counted_s.append(clock.since(mark)[0])
        return elapsed, elapsed

    def measure(self, fn: Callable[[], Any], **options: Any) -> TimingResult:
        """As Timer.measure (the same options), with the timed calls' median counted time
        (``counted_median_s``)."""
        self.counted_s = []
        with CountedClock() as clock:  # the calling thread's: measure runs every call
            self._clock = clock
            try:
                result = super().measure(fn, **options)
            finally:
                self._clock = None
        counted = self.counted_s[-result.reps :] if result.reps else []
        result.counted_median_s = statistics.median(counted) if counted else None
        return result


class CudaTimer(Timer):
    """CUDA events around each call, L2 flushed before it, the device synchronised around it.

    Per call: synchronise; record a "queued" event; flush L2 (a ~60 us memset) and spin
    the GPU for the launch cover, so that the candidate's kernels are all queued before the
    start event fires and the events time the GPU only, not the host's launch path; record
    start; call; record end; synchronise the whole device; record a last event.
    Start-to-end is the current stream's time; start-to-last also covers work the call
    left on other streams. The host clock is kept too.

    The cover adapts: a call whose host launch path (from the queued event to the end
    event) took longer than the GPU work queued ahead of it (queued-to-start on the GPU,
    less a margin) may have left the GPU idle inside the timed region; its time is not
    counted (``last_uncovered``) and the cover grows for the next call, up to
    ``MAX_LAUNCH_COVER_CYCLES``, where calls are counted with a warning.
    """

    device_type = "cuda"

    def __init__(self, device: torch.device | str = "cuda", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.device = torch.device(device)
        self._flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.float32, device=self.device)
        self.all_streams_s: list[float] = []
        self.launch_cover_cycles = LAUNCH_COVER_CYCLES
        self.uncovered_at_max = 0
        """Calls (warm-up included) counted although the longest cover did not cover their
        launch path."""
        self.launch_path_s = 0.0
        """The longest host launch path seen (seconds)."""
        self._reset_persisting_l2 = persisting_l2_reset()

    def time_once(self, fn: Callable[[], Any]) -> tuple[float, float]:
        """(event seconds on the current stream, host seconds) of one call after an L2 flush."""
        queued, start, end, last = (_CudaEvent(enable_timing=True) for _ in range(4))
        _cuda_synchronize(self.device)
        if self._reset_persisting_l2 is not None:
            self._reset_persisting_l2()
        queued.record()
        host_queued = _perf_counter_ns()
        self._flush.zero_()
        if self.launch_cover_cycles and hasattr(torch.cuda, "_sleep"):
            torch.cuda._sleep(self.launch_cover_cycles)
        host_start = _perf_counter_ns()
        start.record()
        fn()
        end.record()
        launch_path_s = (_perf_counter_ns() - host_queued) * 1e-9
        _cuda_synchronize(self.device)
        host_s = (_perf_counter_ns() - host_start) * 1e-9
        last.record()
        last.synchronize()
        ahead_s = queued.elapsed_time(start) * 1e-3  # the GPU work queued before the call
        self.launch_path_s = max(self.launch_path_s, launch_path_s)
        self.last_uncovered = launch_path_s > COVER_MARGIN * ahead_s
        if self.last_uncovered:
            if self.launch_cover_cycles < MAX_LAUNCH_COVER_CYCLES:
                grow = max(2.0, launch_path_s / max(ahead_s, 1e-6) / COVER_MARGIN * 1.5)
                self.launch_cover_cycles = min(
                    MAX_LAUNCH_COVER_CYCLES, int(self.launch_cover_cycles * grow)
                )
            else:
                self.last_uncovered = False  # counted, with a warning (see measure)
                self.uncovered_at_max += 1
        if not self.last_uncovered:
            self.all_streams_s.append(start.elapsed_time(last) * 1e-3)
        return start.elapsed_time(end) * 1e-3, host_s

    def measure(
        self,
        fn: Callable[[], Any],
        *,
        budget_s: float | None = None,
        warmup: int = 2,
        before_call: Callable[[], None] | None = None,
        after_call: Callable[[], None] | None = None,
        all_streams: bool = False,
    ) -> TimingResult:
        """As Timer.measure, with the all-streams cross-check applied.

        With ``all_streams`` (the profiler saw the candidate's kernels on other streams),
        each call's time is its all-streams time less the synchronise round trip (measured
        here on empty calls), and never less than its current-stream time.
        """
        self.all_streams_s = []
        self.uncovered_at_max = 0
        result = super().measure(
            fn, budget_s=budget_s, warmup=warmup, before_call=before_call, after_call=after_call
        )
        if self.uncovered_at_max:
            result.warnings.append(
                f"the host launch path of a call (up to {duration_ms(self.launch_path_s * 1e3)}) "
                f"outlasted the longest launch cover in {self.uncovered_at_max} calls "
                f"(warm-up included; {result.reps} timed): those times include host time"
            )
        if all_streams:
            return self._all_streams_result(result)
        if self._reset_persisting_l2 is None:
            result.warnings.append(
                "the CUDA runtime was not found: lines persisting in L2 were not reset "
                "before each call"
            )
        measured = self.all_streams_s[-result.reps :]
        all_streams = statistics.median(measured) if measured else 0.0
        # Judged raw (no round trip taken off) the excess is at its largest: only when
        # even that is over the limit is the round trip worth measuring (21 empty calls).
        if (
            unseen_stream_excess(
                all_streams_s=all_streams, current_s=result.median_s, round_trip_s=0.0
            )
            is None
        ):
            return result
        round_trip = self.round_trip_s()
        if (
            unseen_stream_excess(
                all_streams_s=all_streams, current_s=result.median_s, round_trip_s=round_trip
            )
            is None
        ):
            return result
        # Events on the current stream miss work on other streams; the device-wide
        # synchronise does not, so the all-streams figure (less the round trip) is the
        # honest one then.
        result.warnings.append(
            f"work outside the current stream? all streams {duration_ms(all_streams * 1e3, 4)} "
            f"(synchronise round trip {duration_ms(round_trip * 1e3)}) vs current stream "
            f"{duration_ms(result.median_s * 1e3, 4)}; the all-streams time less the round trip "
            "is used"
        )
        return self._all_streams_result(result, round_trip=round_trip, warn=False)

    def round_trip_s(self, calls: int = 21) -> float:
        """Median of all-streams minus current-stream time over empty calls: what the
        device-wide synchronise and the last event add to a call that launches nothing."""
        saved = self.all_streams_s
        self.all_streams_s = []
        try:
            current: list[float] = []
            while len(current) < calls:  # an uncovered call is retried (the cover grows)
                part = self.time_once(_NO_HOOK)[0]
                if not self.last_uncovered:
                    current.append(part)
            return statistics.median(
                max(0.0, total - part)
                for total, part in zip(self.all_streams_s, current, strict=True)
            )
        finally:
            self.all_streams_s = saved

    def _all_streams_result(
        self, result: TimingResult, *, round_trip: float | None = None, warn: bool = True
    ) -> TimingResult:
        """Each call's all-streams time less the round trip, never less than its
        current-stream time."""
        measured = self.all_streams_s[-result.reps :]
        if round_trip is None:
            round_trip = self.round_trip_s()
        samples = [
            max(part, total - round_trip)
            for total, part in zip(measured, result.samples_s, strict=True)
        ]
        median, std_error = summarize_samples(samples)
        if warn:
            result.warnings.append(
                f"timed on all streams: {duration_ms(median * 1e3, 4)} (current stream alone "
                f"{duration_ms(result.median_s * 1e3, 4)}; synchronise round trip "
                f"{duration_ms(round_trip * 1e3)} taken off)"
            )
        result.median_s, result.std_error_s, result.samples_s = median, std_error, samples
        return result


def make_timer(device: torch.device | str, **kwargs: Any) -> Timer:
    """The timer for a device ('cpu' or 'cuda[:n]')."""
    device = torch.device(device)
    if device.type == "cuda":
        return CudaTimer(device, **kwargs)
    return CpuTimer(**kwargs)
