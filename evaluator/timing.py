"""Timing of one callable with adaptive repetitions: a CPU timer and a CUDA timer.

Both warm up, then time at least ``min_reps`` calls and keep going until the standard
error of the mean is under ``target_rel_se`` of the median or the time budget is spent.
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

DEFAULT_BUDGET_S = {"cpu": 2.0, "cuda": 1.0}
MIN_REPS = 10
MAX_REPS = 100_000
TARGET_REL_SE = 0.005
L2_FLUSH_BYTES = 256 * 1024 * 1024
"""Larger than the L2 of any supported GPU (H100/H200: 50 MB)."""
LAUNCH_COVER_CYCLES = 400_000
"""A GPU spin of about 200 us at 2 GHz queued after the flush (see CudaTimer.time_once)."""

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


def summarize_samples(samples: list[float]) -> tuple[float, float]:
    """(median, standard error of the mean) of per-call times."""
    median = statistics.median(samples)
    if len(samples) < 2:
        return median, math.inf
    return median, statistics.stdev(samples) / math.sqrt(len(samples))


class _RunningStats:
    """Mean/variance (Welford) and a sorted copy, so each convergence check is cheap."""

    def __init__(self) -> None:
        self.count = 0
        self.mean = 0.0
        self.m2 = 0.0
        self.sorted: list[float] = []

    def add(self, value: float) -> None:
        self.count += 1
        delta = value - self.mean
        self.mean += delta / self.count
        self.m2 += delta * (value - self.mean)
        bisect.insort(self.sorted, value)

    def converged(self, *, min_reps: int, target_rel_se: float) -> bool:
        if self.count < max(2, min_reps):
            return False
        middle = self.count // 2
        median = (
            self.sorted[middle]
            if self.count % 2
            else 0.5 * (self.sorted[middle - 1] + self.sorted[middle])
        )
        std_error = math.sqrt(self.m2 / (self.count - 1) / self.count)
        return median > 0 and std_error <= target_rel_se * median


class Timer(ABC):
    """Times a zero-argument callable (which runs the operator once)."""

    device_type: str = "cpu"

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
            device_s, host_s = self.time_once(fn)
            after()
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
    """Wall-clock timing with ``time.perf_counter_ns`` (device time = host time)."""

    device_type = "cpu"

    def time_once(self, fn: Callable[[], Any]) -> tuple[float, float]:
        """Seconds of one call."""
        start = _perf_counter_ns()
        fn()
        elapsed = (_perf_counter_ns() - start) * 1e-9
        return elapsed, elapsed


class CudaTimer(Timer):
    """CUDA events around each call, L2 flushed before it, the device synchronised around it.

    Per call: synchronise; flush L2 (a ~80 us memset that also hides the host's launch
    overhead: the start event fires when the flush ends, by which time the candidate's
    kernels are queued); record start; call; record end; synchronise the whole device;
    record a third event. Start-to-end is the current stream's time; start-to-third
    also covers work the call left on other streams. The host clock is kept too.
    """

    device_type = "cuda"
    OTHER_STREAM_SLACK_S = 100e-6
    """Start-to-third may exceed start-to-end by the synchronise round trip; beyond this
    (and beyond the event time itself) work outside the current stream is suspected."""

    def __init__(self, device: torch.device | str = "cuda", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.device = torch.device(device)
        self._flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.float32, device=self.device)
        self.all_streams_s: list[float] = []
        self.launch_cover_cycles = LAUNCH_COVER_CYCLES
        self._reset_persisting_l2 = persisting_l2_reset()

    def time_once(self, fn: Callable[[], Any]) -> tuple[float, float]:
        """(event seconds on the current stream, host seconds) of one call after an L2 flush."""
        events = [_CudaEvent(enable_timing=True) for _ in range(3)]
        _cuda_synchronize(self.device)
        if self._reset_persisting_l2 is not None:
            self._reset_persisting_l2()
        self._flush.zero_()
        if self.launch_cover_cycles and hasattr(torch.cuda, "_sleep"):
            # Keep the GPU busy a little longer, so a slow host launch path is still
            # queued before the start event fires (the event then times the GPU only).
            torch.cuda._sleep(self.launch_cover_cycles)
        host_start = _perf_counter_ns()
        events[0].record()
        fn()
        events[1].record()
        _cuda_synchronize(self.device)
        host_s = (_perf_counter_ns() - host_start) * 1e-9
        events[2].record()
        events[2].synchronize()
        self.all_streams_s.append(events[0].elapsed_time(events[2]) * 1e-3)
        return events[0].elapsed_time(events[1]) * 1e-3, host_s

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
        result = super().measure(
            fn, budget_s=budget_s, warmup=warmup, before_call=before_call, after_call=after_call
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
        excess = all_streams - result.median_s
        if excess > max(self.OTHER_STREAM_SLACK_S, result.median_s):
            # Events on the current stream miss work on other streams; the device-wide
            # synchronise does not, so the all-streams figure is the honest one then.
            result.warnings.append(
                f"work outside the current stream? all streams {all_streams * 1e3:.4g} ms vs "
                f"current stream {result.median_s * 1e3:.4g} ms; the larger is used"
            )
            result.median_s, result.std_error_s = summarize_samples(measured)
        return result

    def round_trip_s(self, calls: int = 21) -> float:
        """Median of all-streams minus current-stream time over empty calls: what the
        device-wide synchronise and the third event add to a call that launches nothing."""
        saved = self.all_streams_s
        self.all_streams_s = []
        try:
            current = [self.time_once(_NO_HOOK)[0] for _ in range(calls)]
            return statistics.median(
                max(0.0, total - part)
                for total, part in zip(self.all_streams_s, current, strict=True)
            )
        finally:
            self.all_streams_s = saved

    def _all_streams_result(self, result: TimingResult) -> TimingResult:
        measured = self.all_streams_s[-result.reps :]
        round_trip = self.round_trip_s()
        samples = [
            max(part, total - round_trip)
            for total, part in zip(measured, result.samples_s, strict=True)
        ]
        median, std_error = summarize_samples(samples)
        result.warnings.append(
            f"timed on all streams: {median * 1e3:.4g} ms (current stream alone "
            f"{result.median_s * 1e3:.4g} ms; synchronise round trip "
            f"{round_trip * 1e6:.3g} us taken off)"
        )
        result.median_s, result.std_error_s, result.samples_s = median, std_error, samples
        return result


def make_timer(device: torch.device | str, **kwargs: Any) -> Timer:
    """The timer for a device ('cpu' or 'cuda[:n]')."""
    device = torch.device(device)
    if device.type == "cuda":
        return CudaTimer(device, **kwargs)
    return CpuTimer(**kwargs)
