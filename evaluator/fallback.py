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
under the suite's threshold is a ``fallback`` (``evaluator.results``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch

from evaluator.fallback_cpu import FallbackMonitor, bind_interpreter
from evaluator.fallback_cuda import CudaFallbackMonitor, prepare_cuda_monitoring
from evaluator.fallback_report import NO_MONITOR_WARNING, FallbackReport

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
) -> Monitor:
    """The fallback monitor for candidate calls on ``device``; ``own_code_dir`` is the
    extracted bundle (on CUDA, kernels built from code there are the submission's);
    ``calls``, how many calls it will watch before its report, if known (on CUDA it
    then watches the first more cheaply, see ``CudaFallbackMonitor``)."""
    if device.type == "cuda":
        return CudaFallbackMonitor(own_code_dir=own_code_dir, device=device, calls=calls)
    return FallbackMonitor(own_code_dir=own_code_dir)


def report_for(monitor: Monitor | None, *, q_bytes: int | None) -> FallbackReport:
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
