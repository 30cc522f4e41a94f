"""Fallback attribution: how much of a candidate's call is PyTorch compute (or other work
outside its own kernels), not its kernels. The monitor for a device and its report.

The work is split along its jobs:

* ``evaluator.fallback_cpu``: on the CPU, PyTorch modes that see every aten op and torch
  call, and a clock on the bundle's own Triton kernel launches (``FallbackMonitor``);
* ``evaluator.fallback_cuda``: on CUDA, each call under ``torch.profiler``, every device
  activity attributed by the origin of its kernel (``CudaFallbackMonitor``);
* ``evaluator.elf_symbols``: the names an ELF shared object defines, demangled enough to
  match kernel names (web-safe);
* ``evaluator.fallback_report``: the report both monitors write (web-safe).

The own-kernel share of a shape is measured over its correctness calls; a correct shape
under the suite's threshold is a ``fallback`` (``evaluator.results``). A shape whose first
correctness call launched none of the bundle's own kernels is a fallback from that call
on, and its other correctness trials are not run (``ShapeWatch``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch

from evaluator.fallback_cpu import FallbackMonitor, bind_interpreter
from evaluator.fallback_cuda import (
    CudaFallbackMonitor,
    ModuleScanMemo,
    prepare_cuda_monitoring,
)
from evaluator.fallback_report import FIRST_CALL_DECIDED_WARNING, NO_MONITOR_WARNING, FallbackReport

Monitor = FallbackMonitor | CudaFallbackMonitor


def prepare_monitoring(device: torch.device) -> None:
    """Start the profiler once on ``device`` before the candidate is imported.

    The first profiled region initialises CUPTI (about a second) and may cache values
    in ``torch.cuda``; done before the integrity guard's snapshot, neither is charged to
    the first shape nor reported as the candidate's change. On CPU: bind Triton's
    interpreter launch (``bind_interpreter``).
    """
    if device.type != "cuda":
        bind_interpreter()  # the launch the CPU monitor times, as it is before the candidate
        return
    prepare_cuda_monitoring(device)


def monitor_for(
    device: torch.device,
    *,
    own_code_dir: str | os.PathLike[str] | None = None,
    calls: int | None = None,
    scans: ModuleScanMemo | None = None,
) -> Monitor:
    """The fallback monitor for candidate calls on ``device``; ``own_code_dir`` is the
    extracted bundle (on CUDA, kernels built from code there are the submission's);
    ``calls``, how many calls it will watch before its report, if known (on CUDA it
    then watches the first more cheaply, see ``CudaFallbackMonitor``); ``scans``, the
    child's ``ModuleScanMemo`` (CUDA), which its shapes' reports share."""
    if device.type == "cuda":
        return CudaFallbackMonitor(
            own_code_dir=own_code_dir, device=device, calls=calls, scans=scans
        )
    return FallbackMonitor(own_code_dir=own_code_dir)


class ShapeWatch:
    """The fallback monitor over one shape's correctness calls, which stops watching once
    the first call has decided the shape.

    With ``decide_on_first_call`` (the caller's: a shape whose own-kernel share is 0 is a
    fallback, untimed), a first call that launched none of the bundle's own kernels
    (``first_call_launched_own`` of the monitor: on CUDA no device activity classified as
    own, on the CPU no launch of its own Triton kernels) makes the shape a fallback with
    share 0: its later calls run as they are, unwatched (no profiler, no interception,
    no report pass over them), and the report is the first call's, saying so. Nothing a
    later call does could raise the share above 0 or get the shape timed, so there is
    nothing left to watch for (docs/decisions.md 16). A first call that launched an own
    kernel, or one that cannot be told (the CPU without the bundle's folder or Triton's
    interpreter), leaves every call watched, as without it.
    """

    def __init__(self, monitor: Monitor, *, decide_on_first_call: bool) -> None:
        self.monitor = monitor
        self.decide_on_first_call = decide_on_first_call
        self.decided_on_first_call = False
        """The first call launched none of the bundle's own kernels: a fallback."""
        self.watched_calls = 0
        self.unwatched_calls = 0
        self._looked = False

    def _decide(self) -> None:
        # Once, after the first call and before the next call or the report: so a shape
        # whose first answer was wrong, or that has one trial, spends nothing on it.
        if self._looked or not self.decide_on_first_call or self.watched_calls != 1:
            return
        self._looked = True
        self.decided_on_first_call = self.monitor.first_call_launched_own() is False

    def settled(self) -> bool:
        """The first call decided the shape a fallback: its later correctness trials are
        not run (``evaluator.correctness.check_shape``'s ``settled``)."""
        self._decide()
        return self.decided_on_first_call

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run one candidate call: under the monitor, unless the first call decided."""
        self._decide()
        if self.decided_on_first_call:
            self.unwatched_calls += 1
            return fn()
        result = self.monitor.call(fn)
        self.watched_calls += 1
        return result

    def report(self, *, q_bytes: int | None) -> FallbackReport:
        """The monitor's report; once decided, the first call's, with share 0 and a warning
        (its top ops are the first call's: what did the work there)."""
        self._decide()
        if not self.decided_on_first_call:
            return self.monitor.report(q_bytes=q_bytes)
        report = self.monitor.first_call_report(q_bytes=q_bytes)
        report.own_kernel_share = 0.0
        report.decided_on_first_call = True
        report.observed_call_s = None  # a fallback is not timed: nothing to compare with
        report.warnings.append(FIRST_CALL_DECIDED_WARNING)
        return report


def report_for(monitor: Monitor | ShapeWatch | None, *, q_bytes: int | None) -> FallbackReport:
    """The monitor's report (share None and a warning where there is no monitor)."""
    if monitor is None:
        return FallbackReport(own_kernel_share=None, warnings=[NO_MONITOR_WARNING])
    return monitor.report(q_bytes=q_bytes)


def measure_fallback(
    fn: Callable[[], Any],
    *,
    device: torch.device,
    q_bytes: int | None,
    calls: int = 3,
    own_code_dir: str | os.PathLike[str] | None = None,
) -> FallbackReport:
    """Own-kernel share of ``fn`` (one candidate call) over ``calls`` monitored calls."""
    monitor = monitor_for(device, own_code_dir=own_code_dir, calls=calls)
    for _ in range(calls):
        monitor.call(fn)
    return report_for(monitor, q_bytes=q_bytes)
