"""Fallback attribution: how much of a candidate's call is PyTorch compute, not its kernel.

On CPU the candidate's forward runs under two PyTorch modes:

* a ``TorchDispatchMode`` sees every aten op and classifies it. Allocations (empty,
  zeros, fill: memsets, no arithmetic), views and metadata ops are allowed; every other
  op (arithmetic, reductions, activations, copies, clones, dtype casts) is PyTorch
  compute. Ops issued by the Triton interpreter itself (it copies kernel arguments to
  host storage and back) are not the submission's: an op whose nearest caller outside
  torch is a frame of the ``triton`` package is ignored.
* a ``TorchFunctionMode`` times each torch call made by the candidate, so the Python
  binding overhead around a compute op is counted with it.

Two shares are measured: by time (1 - time in compute calls / call time) and by bytes
(1 - bytes touched by compute ops / the shape's Q). The Triton interpreter runs a
kernel about a thousand times slower than a GPU would, so on CPU a trivial Triton launch
can outweigh real PyTorch work by time alone; the reported share is the smaller one.

On CUDA, attribution by device-kernel origin lands with the profiler pass; until then
the share is None and a warning says so.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.util import find_spec
from types import CodeType, FrameType
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

CUDA_WARNING = "fallback attribution on CUDA lands with the profiler pass"

ALLOCATION_OPS = frozenset(
    {
        "empty",
        "empty_like",
        "empty_strided",
        "new_empty",
        "new_empty_strided",
        # Memsets: trivial fills, no arithmetic on the operator's data.
        "zeros",
        "zeros_like",
        "zero_",
        "fill_",
        "full",
        "full_like",
        "ones",
        "ones_like",
        "new_zeros",
        "new_ones",
        "new_full",
        "scalar_tensor",
        "lift_fresh",
        "lift_fresh_copy",
        "resize_",
    }
)
VIEW_OPS = frozenset(
    {
        "view",
        "_unsafe_view",
        "_reshape_alias",
        "as_strided",
        "t",
        "transpose",
        "permute",
        "expand",
        "detach",
        "alias",
        "slice",
        "select",
        "split",
        "split_with_sizes",
        "unsqueeze",
        "squeeze",
        "unbind",
        "narrow",
        "view_as_real",
        "view_as_complex",
        "unfold",
        "diagonal",
        "_local_scalar_dense",
        "sym_size",
        "sym_stride",
        "sym_numel",
        "sym_storage_offset",
        "is_contiguous",
        "is_same_size",
        "_has_compatible_shallow_copy_type",
        "set_",
        "prim",
    }
)
ALLOWED_OPS = ALLOCATION_OPS | VIEW_OPS


def _package_dir(name: str) -> str | None:
    spec = find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.realpath(next(iter(spec.submodule_search_locations))) + os.sep


def op_name(func: Any) -> str:
    """'aten.mean.dim' style name of an aten overload."""
    return str(func)


def is_allowed_op(func: Any) -> bool:
    """Whether an aten op is an allocation, a view or metadata (not PyTorch compute)."""
    packet = getattr(func, "overloadpacket", None)
    name = getattr(packet, "__name__", None) or str(func).split(".")[1]
    return name in ALLOWED_OPS


@dataclass
class OpStats:
    """Calls, time and bytes of one aten op seen as PyTorch compute."""

    calls: int = 0
    time_s: float = 0.0
    nbytes: int = 0


@dataclass
class FallbackReport:
    """Own-kernel share of a candidate's calls and the PyTorch compute ops seen."""

    own_kernel_share: float | None
    share_by_time: float | None = None
    share_by_bytes: float | None = None
    total_s: float = 0.0
    compute_s: float = 0.0
    compute_bytes: int = 0
    top_ops: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy."""
        return {
            "own_kernel_share": self.own_kernel_share,
            "share_by_time": self.share_by_time,
            "share_by_bytes": self.share_by_bytes,
            "total_s": self.total_s,
            "compute_s": self.compute_s,
            "compute_bytes": self.compute_bytes,
            "top_ops": self.top_ops,
            "warnings": self.warnings,
        }


def _tensor_bytes(value: Any, seen: set[int]) -> int:
    if isinstance(value, torch.Tensor):
        key = id(value)
        if key in seen:
            return 0
        seen.add(key)
        return value.numel() * value.element_size()
    if isinstance(value, list | tuple):
        return sum(_tensor_bytes(item, seen) for item in value)
    if isinstance(value, Mapping):
        return sum(_tensor_bytes(item, seen) for item in value.values())
    return 0


class _Ledger:
    """What both modes record during one monitored region."""

    def __init__(self) -> None:
        self.ops: dict[str, OpStats] = {}
        self.compute_ops = 0
        self.compute_s = 0.0
        self.compute_bytes = 0
        self.in_function = False


class _ComputeDispatchMode(TorchDispatchMode):
    """Classifies aten ops; records PyTorch compute ops issued by the candidate."""

    def __init__(self, ledger: _Ledger, ignored_dirs: tuple[str, ...], torch_dir: str) -> None:
        super().__init__()
        self.ledger = ledger
        self.ignored_dirs = ignored_dirs
        self.torch_dir = torch_dir
        self._code_verdicts: dict[CodeType, bool | None] = {}

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # Torch wraps a mode's __torch_dispatch__ in a dynamo-disable shim whose first call
        # imports torch._dynamo (about 2 s per child process). This mode never compiles.
        return False

    def _issued_by_ignored_package(self) -> bool:
        """Whether the nearest frame outside torch and this module is in an ignored package."""
        frame: FrameType | None = sys._getframe(2)
        while frame is not None:
            verdict = self._code_verdicts.get(frame.f_code, "unknown")
            if verdict == "unknown":
                filename = os.path.realpath(frame.f_code.co_filename)
                if filename.startswith(self.torch_dir) or filename == _THIS_FILE:
                    verdict = None  # keep walking
                else:
                    verdict = filename.startswith(self.ignored_dirs)
                self._code_verdicts[frame.f_code] = verdict
            if verdict is not None:
                return bool(verdict)
            frame = frame.f_back
        return False

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None
    ) -> Any:
        kwargs = kwargs or {}
        if is_allowed_op(func) or self._issued_by_ignored_package():
            return func(*args, **kwargs)
        # Composite ops (reshape, contiguous, to) are classified by what they decompose
        # into: a reshape of a contiguous tensor is a view, of a strided one a copy.
        with self:
            decomposed = func.decompose(*args, **kwargs)
        if decomposed is not NotImplemented:
            return decomposed
        start = time.perf_counter_ns()
        result = func(*args, **kwargs)
        elapsed = (time.perf_counter_ns() - start) * 1e-9
        nbytes = _tensor_bytes(args, set()) + _tensor_bytes(kwargs, set())
        nbytes += _tensor_bytes(result, set())
        stats = self.ledger.ops.setdefault(op_name(func), OpStats())
        stats.calls += 1
        stats.time_s += elapsed
        stats.nbytes += nbytes
        self.ledger.compute_ops += 1
        self.ledger.compute_bytes += nbytes
        if not self.ledger.in_function:
            self.ledger.compute_s += elapsed
        return result


class _CallTimingMode(TorchFunctionMode):
    """Times each torch call; a call that issued compute ops counts whole as compute."""

    def __init__(self, ledger: _Ledger) -> None:
        super().__init__()
        self.ledger = ledger

    def __torch_function__(
        self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None
    ) -> Any:
        kwargs = kwargs or {}
        if self.ledger.in_function:
            return func(*args, **kwargs)
        before = self.ledger.compute_ops
        self.ledger.in_function = True
        start = time.perf_counter_ns()
        try:
            return func(*args, **kwargs)
        finally:
            elapsed = (time.perf_counter_ns() - start) * 1e-9
            self.ledger.in_function = False
            if self.ledger.compute_ops > before:
                self.ledger.compute_s += elapsed


_THIS_FILE = os.path.realpath(__file__)


class FallbackMonitor:
    """Measures the PyTorch-compute part of calls made while it is active (CPU)."""

    def __init__(self, *, ignored_packages: tuple[str, ...] = ("triton",)) -> None:
        dirs = tuple(d for d in (_package_dir(p) for p in ignored_packages) if d)
        self.ledger = _Ledger()
        self._dispatch = _ComputeDispatchMode(self.ledger, dirs, _package_dir("torch") or "\0")
        self._function = _CallTimingMode(self.ledger)
        self.total_s = 0.0
        self.calls = 0

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` under both modes, adding its time to the total."""
        start = time.perf_counter_ns()
        with self._function, self._dispatch:
            result = fn()
        self.total_s += (time.perf_counter_ns() - start) * 1e-9
        self.calls += 1
        return result

    def report(self, *, q_bytes: int | None, top: int = 5) -> FallbackReport:
        """The shares (by time and by bytes, ``q_bytes`` per call) and the top compute ops."""
        ledger = self.ledger
        calls = max(1, self.calls)
        by_time = 1.0 - ledger.compute_s / self.total_s if self.total_s > 0 else 1.0
        by_time = min(1.0, max(0.0, by_time))
        by_bytes = None
        if q_bytes:
            by_bytes = min(1.0, max(0.0, 1.0 - ledger.compute_bytes / (calls * q_bytes)))
        share = by_time if by_bytes is None else min(by_time, by_bytes)
        ranked = sorted(ledger.ops.items(), key=lambda item: item[1].time_s, reverse=True)
        top_ops = [
            {"op": name, "calls": stats.calls, "time_ms": stats.time_s * 1e3, "bytes": stats.nbytes}
            for name, stats in ranked[:top]
        ]
        return FallbackReport(
            own_kernel_share=share,
            share_by_time=by_time,
            share_by_bytes=by_bytes,
            total_s=self.total_s,
            compute_s=ledger.compute_s,
            compute_bytes=ledger.compute_bytes,
            top_ops=top_ops,
        )


def monitor_for(device: torch.device) -> FallbackMonitor | None:
    """A monitor for candidate calls on ``device``, or None where none exists yet (CUDA)."""
    return None if device.type == "cuda" else FallbackMonitor()


def report_for(monitor: FallbackMonitor | None, *, q_bytes: int | None) -> FallbackReport:
    """The monitor's report, or the CUDA placeholder (share None and a warning)."""
    if monitor is None:
        return FallbackReport(own_kernel_share=None, warnings=[CUDA_WARNING])
    return monitor.report(q_bytes=q_bytes)


def measure_fallback(
    fn: Callable[[], Any], *, device: torch.device, q_bytes: int | None, calls: int = 3
) -> FallbackReport:
    """Own-kernel share of ``fn`` (one candidate call) over ``calls`` monitored calls."""
    monitor = monitor_for(device)
    if monitor is not None:
        for _ in range(calls):
            monitor.call(fn)
    return report_for(monitor, q_bytes=q_bytes)
