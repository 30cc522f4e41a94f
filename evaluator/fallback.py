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

Two shares are measured: by time (1 - time in compute calls / call time, the median
call's) and by bytes (1 - bytes touched by compute ops / the shape's Q). The Triton
interpreter runs a kernel about a thousand times slower than a GPU would, so on CPU a
trivial Triton launch can outweigh real PyTorch work by time alone; the reported share is
the smaller one. With the bundle's folder (``own_code_dir``) a third share bounds them:
the time inside launches of the bundle's own Triton kernels (the interpreter's
``InterpretedFunction.run``, as bound before the candidate was imported) over the call
time, the median call's. Work done outside PyTorch and outside those kernels (NumPy,
plain Python, another library) is then not the submission's own either.

On CUDA (``CudaFallbackMonitor``) each call runs under ``torch.profiler`` with the device
synchronised inside the profiled region, so every kernel, memcpy and memset it caused is
captured, side streams included. Each device activity is then classified:

* **own**: a kernel whose name is that of a Triton kernel compiled from a JIT function
  whose source file lies inside the bundle (``own_code_dir``), or a kernel defined in a
  shared object compiled from the bundle's sources (see ``extension_kernel_names``);
* **neutral** (in neither numerator nor denominator): memsets, and fill kernels launched
  by allocation ops (``zeros``, ``fill_``, ``zero_``, ...). They only initialise memory;
  Triton's own autotuner also clears the L2 this way between benchmark runs;
* **other**: everything else: kernels launched from inside an ``aten::`` op (whatever
  their name: cuBLAS, cuDNN, CUTLASS and PyTorch's own kernels are always launched
  there, so a Triton kernel that borrows a cuBLAS kernel's name gains nothing),
  torch.compile/inductor kernels (their source is in the inductor cache, not the
  bundle), memcpys, and kernels of unknown origin. A name that is defined both in the
  bundle and by a JIT function elsewhere is counted as other, with a warning.

own_kernel_share = own device time / (own + other) device time over the monitored calls
after the first one (the first call compiles, and autotunes: its own-kernel benchmark
runs would pad the share; with a single call, that call). If no kernel ran at all the
share is 0 with a warning. Work on the host (PyTorch on CPU tensors inside a CUDA call)
is not device time; only the copies it needs show up, as other.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import re
import statistics
import struct
import sys
import sysconfig
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib.util import find_spec
from itertools import chain
from pathlib import Path
from types import CodeType, FrameType, FunctionType
from typing import Any

import torch
from torch.autograd import DeviceType
from torch.overrides import TorchFunctionMode
from torch.profiler import ProfilerActivity, profile
from torch.utils._python_dispatch import TorchDispatchMode

from evaluator.code_origin import genuine

NO_KERNEL_WARNING = "no device kernel ran during the monitored calls"
NO_MONITOR_WARNING = "no fallback monitor for this device"
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
    share_in_own_kernels: float | None = None
    """CPU with the bundle's folder: the median call's share of time inside the bundle's
    own Triton kernel launches."""
    total_s: float = 0.0
    compute_s: float = 0.0
    compute_bytes: int = 0
    top_ops: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    own_s: float | None = None
    """CUDA: device time of the submission's own kernels (``compute_s`` is the rest); CPU
    with the bundle's folder: time inside its own Triton kernel launches."""
    neutral_s: float | None = None
    """CUDA: device time of memsets and fills, counted on neither side."""
    other_stream_activities: int = 0
    """CUDA: device activities of the calls that ran on a stream other than the one the
    harness called on (CUDA events on that stream do not see them; the timer must then
    time all streams)."""
    observed_call_s: float | None = None
    """The fastest watched call after the first: its device busy time (CUDA: the busiest
    stream's kernels, copies and fills) or its wall time (CPU). The timed calls must not
    be much faster (see ``evaluator.child.UNWATCHED_SPEEDUP_LIMIT``)."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy."""
        return {
            "own_kernel_share": self.own_kernel_share,
            "share_by_time": self.share_by_time,
            "share_by_bytes": self.share_by_bytes,
            "share_in_own_kernels": self.share_in_own_kernels,
            "total_s": self.total_s,
            "compute_s": self.compute_s,
            "compute_bytes": self.compute_bytes,
            "own_s": self.own_s,
            "neutral_s": self.neutral_s,
            "other_stream_activities": self.other_stream_activities,
            "observed_call_s": self.observed_call_s,
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
                    # Code that names an ignored package's file without coming from it
                    # (compiled by the candidate under that name) is the candidate's.
                    verdict = filename.startswith(self.ignored_dirs) and genuine(frame.f_code)
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
FRAME_USER_CODES = (_ComputeDispatchMode._issued_by_ignored_package.__code__,)
"""The harness's only code that asks for frames while a candidate's code is on the stack
(the audit hook lets exactly these code objects have them: ``evaluator.integrity``). It
hands on no frame, only their code objects and file names."""


OUTSIDE_OWN_KERNELS = "outside its Triton kernels (plain Python, NumPy or another library)"
"""How the CPU monitor's top ops name the time spent neither in PyTorch compute nor in the
bundle's own Triton kernels, when that is what made the share low."""

_INTERPRETER_RUN: dict[str, Any] = {}
"""Triton's interpreter class and its ``run`` as they were before any candidate code ran
(``bind_interpreter``)."""


def bind_interpreter() -> bool:
    """Keep Triton's interpreter launch (``InterpretedFunction.run``) as it is now, before
    the candidate is imported, so that a candidate that replaces it cannot hide its work
    inside a "launch"; True when there is an interpreter."""
    if _INTERPRETER_RUN:
        return True
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except Exception:  # noqa: BLE001 - no Triton here (or a broken one): nothing to bind
        return False
    _INTERPRETER_RUN.update(cls=InterpretedFunction, run=InterpretedFunction.run)
    return True


class _OwnKernelClock:
    """CPU: the time inside launches of the bundle's own Triton kernels.

    While active, the interpreter's launch is replaced by a wrapper around the launch
    bound by ``bind_interpreter``; a launch counts when its JIT function's source file lies
    in the bundle's folder (autotuning and heuristics end in the same launch)."""

    def __init__(self, own_code_dir: str | os.PathLike[str]) -> None:
        self.own_dir = os.path.join(os.path.realpath(own_code_dir), "")
        self.seconds = 0.0
        self._depth = 0
        self._verdicts: dict[CodeType, bool] = {}
        self._saved: Any = None

    def _own(self, kernel: Any) -> bool:
        code = getattr(getattr(kernel, "fn", None), "__code__", None)
        if not isinstance(code, CodeType):
            return False
        verdict = self._verdicts.get(code)
        if verdict is None:
            verdict = os.path.realpath(code.co_filename).startswith(self.own_dir)
            self._verdicts[code] = verdict
        return verdict

    def __enter__(self) -> _OwnKernelClock:
        cls, true_run = _INTERPRETER_RUN["cls"], _INTERPRETER_RUN["run"]
        clock = self

        def run(kernel: Any, *args: Any, **kwargs: Any) -> Any:
            if clock._depth or not clock._own(kernel):
                return true_run(kernel, *args, **kwargs)
            clock._depth += 1
            start = time.perf_counter_ns()
            try:
                return true_run(kernel, *args, **kwargs)
            finally:
                clock._depth -= 1
                clock.seconds += (time.perf_counter_ns() - start) * 1e-9

        self._saved = cls.__dict__.get("run")
        cls.run = run
        return self

    def __exit__(self, *exc: object) -> None:
        _INTERPRETER_RUN["cls"].run = self._saved


class FallbackMonitor:
    """Measures the PyTorch-compute part of calls made while it is active (CPU)."""

    def __init__(
        self,
        *,
        ignored_packages: tuple[str, ...] = ("triton",),
        own_code_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        dirs = tuple(d for d in (_package_dir(p) for p in ignored_packages) if d)
        self.ledger = _Ledger()
        self._dispatch = _ComputeDispatchMode(self.ledger, dirs, _package_dir("torch") or "\0")
        self._function = _CallTimingMode(self.ledger)
        self._kernels = (
            _OwnKernelClock(own_code_dir)
            if own_code_dir is not None and bind_interpreter()
            else None
        )
        self.total_s = 0.0
        self.call_s: list[float] = []
        """Wall seconds of each watched call."""
        self.call_compute_s: list[float] = []
        """Seconds of each watched call spent in PyTorch compute."""
        self.call_own_s: list[float] = []
        """Seconds of each watched call inside the bundle's own Triton kernels (with
        ``own_code_dir`` and an interpreter; else empty)."""

    @property
    def calls(self) -> int:
        """How many calls were monitored."""
        return len(self.call_s)

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` under both modes, adding its time to the total."""
        compute_before = self.ledger.compute_s
        kernels = self._kernels
        own_before = kernels.seconds if kernels is not None else 0.0
        start = time.perf_counter_ns()
        with self._function, self._dispatch, kernels or contextlib.nullcontext():
            result = fn()
        elapsed = (time.perf_counter_ns() - start) * 1e-9
        self.total_s += elapsed
        self.call_s.append(elapsed)
        self.call_compute_s.append(self.ledger.compute_s - compute_before)
        if kernels is not None:
            self.call_own_s.append(kernels.seconds - own_before)
        return result

    def _median_part(self, seconds: list[float]) -> float | None:
        """The median over the watched calls of ``seconds`` (one entry per call) as a share
        of the call's wall time; None without a timed call."""
        parts = [
            part / elapsed
            for elapsed, part in zip(self.call_s, seconds, strict=True)
            if elapsed > 0
        ]
        return statistics.median(parts) if parts else None

    def report(self, *, q_bytes: int | None, top: int = 5) -> FallbackReport:
        """The shares (by time and by bytes, ``q_bytes`` per call) and the top compute ops."""
        ledger = self.ledger
        calls = max(1, self.calls)
        # The median call's share: a call during which the host was taken away (a busy
        # machine) puts that wait outside PyTorch's ops, and over a few calls would make
        # even pure PyTorch look 85 % the candidate's own (seen on a loaded 2-core CI host).
        compute_part = self._median_part(self.call_compute_s)
        by_time = 1.0 - compute_part if compute_part is not None else 1.0
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
        by_kernels = None
        if self._kernels is not None:
            own_part = self._median_part(self.call_own_s)
            by_kernels = min(1.0, own_part) if own_part is not None else 0.0
            if by_kernels < share:
                # Neither PyTorch nor its own kernels did the work: say where it went.
                outside_s = self.total_s - ledger.compute_s - self._kernels.seconds
                top_ops.insert(
                    0,
                    {
                        "op": OUTSIDE_OWN_KERNELS,
                        "calls": calls,
                        "time_ms": max(0.0, outside_s) * 1e3,
                    },
                )
                share = by_kernels
        steady = self.call_s[1:] or self.call_s
        return FallbackReport(
            own_kernel_share=share,
            share_by_time=by_time,
            share_by_bytes=by_bytes,
            share_in_own_kernels=by_kernels,
            total_s=self.total_s,
            compute_s=ledger.compute_s,
            compute_bytes=ledger.compute_bytes,
            own_s=self._kernels.seconds if self._kernels is not None else None,
            top_ops=top_ops,
            observed_call_s=min(steady) if steady else None,
        )


# --------------------------------------------------------------------------- CUDA

OWN, OTHER, NEUTRAL = "own", "other", "neutral"
KERNEL, MEMCPY, MEMSET = "kernel", "memcpy", "memset"
_ACTIVITY_KINDS = {"kernel": KERNEL, "gpu_memcpy": MEMCPY, "gpu_memset": MEMSET}
_TRITON_SPECIALISATION = re.compile(r"(?:\d+[cde]*)+")
"""Suffix that Triton 2.x appended to kernel names (``_0d1d2de``); 3.x appends none."""
_NAME_CHARS = 240
"""Longest kernel name kept in a report (C++ template names run to kilobytes)."""


@dataclass(frozen=True)
class DeviceActivity:
    """One kernel, memcpy or memset that ran on the device during a monitored call."""

    name: str
    duration_ns: int
    kind: str = KERNEL
    launched_by: str | None = None
    """Innermost profiler op active on the host at launch (``aten::mm``), if any."""
    stream: int | None = None
    """The profiler's id of the stream it ran on (``device_resource_id``), if known."""


@dataclass(frozen=True)
class KernelOrigins:
    """Which kernel names are the submission's own."""

    own_triton: frozenset[str] = frozenset()
    """``__name__`` of Triton JIT functions whose source file is inside the bundle."""
    foreign_triton: frozenset[str] = frozenset()
    """``__name__`` of JIT functions defined anywhere else (libraries, inductor's cache)."""
    own_extension: frozenset[str] = frozenset()
    """Qualified C++ names (``ns::kernel``) of functions defined in the bundle's .so files."""


def _matches_triton_name(kernel: str, names: frozenset[str]) -> str | None:
    """The Triton function name ``kernel`` was compiled from, if it is in ``names``."""
    if kernel in names:
        return kernel
    base, _, suffix = kernel.rpartition("_")
    while base:
        if base in names and _TRITON_SPECIALISATION.fullmatch(suffix):
            return base
        base, _, more = base.rpartition("_")
        suffix = f"{more}_{suffix}"
    return None


def cxx_qualified_name(demangled: str) -> str:
    """``ns::kernel`` from a demangled signature (``void ns::kernel<float>(float*, int)``)."""
    text = demangled.replace("(anonymous namespace)", "\0anon\0")
    depth, head = 0, []
    for char in text:
        if char == "<":
            depth += 1
        elif char == ">":
            depth = max(0, depth - 1)
        elif depth == 0:
            if char == "(":
                break
            head.append(char)
    words = "".join(head).split()
    return words[-1].replace("\0anon\0", "(anonymous namespace)") if words else ""


def itanium_qualified_name(symbol: str) -> str | None:
    """``ns::kernel`` from an Itanium-mangled symbol (``_ZN2ns6kernelIfEEvPT_``); plain
    identifiers (``extern "C"``) as they are; None for what this partial reader skips."""
    if not symbol.startswith("_Z"):
        return symbol if symbol.isidentifier() else None
    text, index, parts = symbol[2:], 0, []
    if text.startswith("L"):
        index = 1
    nested = text.startswith("N", index)
    if nested:
        index += 1
        while index < len(text) and text[index] in "rVKRO":
            index += 1
        if text.startswith("St", index):
            parts.append("std")
            index += 2
    while index < len(text) and text[index].isdigit():
        end = index
        while end < len(text) and text[end].isdigit():
            end += 1
        length = int(text[index:end])
        name = text[end : end + length]
        if len(name) != length:
            return None
        parts.append("(anonymous namespace)" if name.startswith("_GLOBAL__N") else name)
        index = end + length
        if not nested:
            break
    return "::".join(parts) or None


def classify_activity(activity: DeviceActivity, origins: KernelOrigins) -> str:
    """OWN, OTHER or NEUTRAL (see the module docstring for the rules and their order)."""
    launcher = activity.launched_by or ""
    if activity.kind == MEMSET:
        return NEUTRAL
    if launcher.startswith("aten::") and launcher[6:] in ALLOCATION_OPS:
        return NEUTRAL
    if activity.kind == MEMCPY or launcher.startswith("aten::"):
        return OTHER
    triton = _matches_triton_name(activity.name, origins.own_triton)
    if triton is not None:
        return OTHER if triton in origins.foreign_triton else OWN
    if cxx_qualified_name(activity.name) in origins.own_extension:
        return OWN
    return OTHER


@dataclass
class KernelStats:
    """Count and device time of one non-own kernel name."""

    calls: int = 0
    time_ns: int = 0
    launched_by: str | None = None


def attribution_report(
    activities: Iterable[DeviceActivity], origins: KernelOrigins, *, top: int = 5
) -> FallbackReport:
    """Own-kernel share of device time over ``activities``, and the top non-own kernels."""
    totals = {OWN: 0, OTHER: 0, NEUTRAL: 0}
    others: dict[str, KernelStats] = {}
    warnings: list[str] = []
    for activity in activities:
        verdict = classify_activity(activity, origins)
        totals[verdict] += activity.duration_ns
        if verdict != OTHER:
            continue
        name = activity.name[:_NAME_CHARS]
        stats = others.setdefault(name, KernelStats(launched_by=activity.launched_by))
        stats.calls += 1
        stats.time_ns += activity.duration_ns
        clash = _matches_triton_name(activity.name, origins.own_triton)
        if clash in origins.foreign_triton and not activity.launched_by:
            warning = (
                f"kernel name {clash!r} is defined both in the bundle and outside it; "
                "its time counts as not the bundle's"
            )
            if warning not in warnings:
                warnings.append(warning)
    measured = totals[OWN] + totals[OTHER]
    if measured > 0:
        share = totals[OWN] / measured
    else:
        share = 0.0
        warnings.append(NO_KERNEL_WARNING)
    ranked = sorted(others.items(), key=lambda item: item[1].time_ns, reverse=True)
    top_ops = [
        {
            "op": name,
            "calls": stats.calls,
            "time_ms": stats.time_ns * 1e-6,
            "launched_by": stats.launched_by,
        }
        for name, stats in ranked[:top]
    ]
    return FallbackReport(
        own_kernel_share=share,
        share_by_time=share,
        total_s=measured * 1e-9,
        compute_s=totals[OTHER] * 1e-9,
        own_s=totals[OWN] * 1e-9,
        neutral_s=totals[NEUTRAL] * 1e-9,
        top_ops=top_ops,
        warnings=warnings,
    )


# ----------------------------------------------------------------- where kernels come from


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _installed_roots() -> tuple[str, ...]:
    """Directories of installed code: the standard library and site-packages."""
    paths = sysconfig.get_paths()
    roots = {paths.get(key) for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    roots.update(p for p in sys.path if p.endswith(("site-packages", "dist-packages")))
    return tuple(os.path.realpath(r) for r in roots if r)


def _is_own_file(path: str, own_root: str | None, installed: tuple[str, ...]) -> bool:
    """Inside the bundle; without a bundle directory, anything not installed or generated."""
    real = os.path.realpath(path)
    if own_root is not None:
        return _inside(real, own_root)
    if "torchinductor" in real or real.startswith("<"):
        return False
    return not any(_inside(real, root) for root in installed)


def _kernel_function(obj: Any, kernel_interface: type) -> FunctionType | None:
    """The Python function under a JITFunction / Autotuner / Heuristics / interpreted one."""
    # type(), not isinstance(): some library objects warn when their __class__ is read.
    if not issubclass(type(obj), kernel_interface):
        return None
    for _ in range(6):
        # Instance attributes only: a property on a candidate's object must not run here.
        obj = vars(obj).get("fn") if hasattr(type(obj), "__dict__") else None
        if type(obj) is FunctionType:
            return obj
        if not issubclass(type(obj), kernel_interface):
            return None
    return None


def _module_values(module: Any, *, nested: bool) -> Iterable[Any]:
    """A module's globals, and (``nested``) one level into its classes and containers."""
    try:
        values = list(vars(module).values())
    except TypeError:
        return []
    if not nested:
        return values
    more: list[Any] = []
    for value in values:
        if isinstance(value, type):
            more.extend(vars(value).values())
        elif isinstance(value, dict):
            more.extend(value.values())
        elif isinstance(value, list | tuple):
            more.extend(value)
    return chain(values, more)


def triton_kernel_names(own_code_dir: Path | None) -> tuple[frozenset[str], frozenset[str]]:
    """(own, foreign) names of Triton kernels reachable from loaded modules.

    Own: JIT functions (or autotuners, heuristics around them) whose function's source
    file lies inside ``own_code_dir`` (the bundle), found in the globals of the bundle's
    modules and one level inside their classes, dicts and lists. Foreign: those defined
    anywhere else, found in every other module's globals (inductor's generated modules
    included; Triton's own language helpers excluded). Without ``own_code_dir``, own means
    "not installed, not generated".
    """
    try:
        from triton.runtime.jit import KernelInterface
    except ImportError:
        return frozenset(), frozenset()
    own_root = os.path.realpath(own_code_dir) if own_code_dir is not None else None
    installed = _installed_roots()
    # triton.language's JIT functions are device helpers (tl.softmax, tl.sum), inlined into
    # kernels, never launched: a kernel named "softmax" must not clash with them.
    triton_dir = _package_dir("triton")
    own: set[str] = set()
    foreign: set[str] = set()
    for module in list(sys.modules.values()):
        filename = getattr(module, "__file__", None)
        if not isinstance(filename, str):
            continue
        if triton_dir and os.path.realpath(filename).startswith(triton_dir):
            continue
        from_bundle = _is_own_file(filename, own_root, installed)
        for value in _module_values(module, nested=from_bundle):
            function = _kernel_function(value, KernelInterface)
            if function is None:
                continue
            if _is_own_file(function.__code__.co_filename, own_root, installed):
                own.add(function.__name__)
            else:
                foreign.add(function.__name__)
    return frozenset(own), frozenset(foreign)


def extension_roots(own_code_dir: Path | None) -> tuple[str, ...]:
    """Where shared objects built from the bundle's sources live: the bundle itself, and
    torch's extension build root (``torch.utils.cpp_extension.load`` builds there; the
    harness builds nothing, so what a candidate process built there is the candidate's)."""
    roots = [os.path.realpath(own_code_dir)] if own_code_dir is not None else []
    cpp_extension = sys.modules.get("torch.utils.cpp_extension")
    if cpp_extension is not None:
        try:
            roots.append(os.path.realpath(cpp_extension.get_default_build_root()))
        except Exception:  # best effort: an unusual environment only loses this root
            pass
    return tuple(roots)


def loaded_shared_objects() -> set[str]:
    """Paths of the shared objects loaded in this process (/proc/self/maps, sys.modules)."""
    paths = {
        os.path.realpath(f)
        for f in (getattr(m, "__file__", None) for m in list(sys.modules.values()))
        if isinstance(f, str) and f.endswith(".so")
    }
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                fields = line.split(maxsplit=5)
                if len(fields) == 6 and ".so" in fields[5]:
                    paths.add(os.path.realpath(fields[5].strip()))
    except OSError:
        pass  # not Linux: Python extension modules are still found through sys.modules
    return paths


_ELF_CACHE: dict[tuple[str, float], frozenset[str]] = {}
_MANGLED = re.compile(rb"_Z[A-Za-z0-9_]{3,}")


def shared_object_function_names(path: str) -> frozenset[str]:
    """Qualified names of the functions a 64-bit little-endian ELF file defines.

    Read from its symbol tables (defined FUNC symbols of .symtab and .dynsym) and from
    the mangled names in its read-only data and CUDA fat binary (where the kernels'
    registration names live, so a stripped library still names its kernels).
    """
    try:
        key = (path, os.stat(path).st_mtime)
    except OSError:
        return frozenset()
    if key not in _ELF_CACHE:
        try:
            _ELF_CACHE[key] = frozenset(_elf_names(path))
        except (OSError, ValueError, struct.error):
            _ELF_CACHE[key] = frozenset()
    return _ELF_CACHE[key]


def _elf_names(path: str) -> set[str]:
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
            raise ValueError("not a 64-bit little-endian ELF file")
        (shoff,) = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
        sections = [
            struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)
        ]

        def text_at(table: int, offset: int) -> str:
            start = sections[table][4] + offset
            end = data.find(b"\0", start)
            return data[start:end].decode("ascii", "replace")

        names: set[str] = set()
        for header in sections:
            name_offset, kind, _, _, offset, size, link, _, _, entsize = header
            section = text_at(shstrndx, name_offset)
            if kind in (2, 11) and entsize:  # SHT_SYMTAB, SHT_DYNSYM
                for at in range(offset, offset + size, entsize):
                    st_name, st_info, _other, st_shndx = struct.unpack_from("<IBBH", data, at)
                    if st_shndx != 0 and st_info & 0xF == 2:  # defined STT_FUNC
                        qualified = itanium_qualified_name(text_at(link, st_name))
                        if qualified:
                            names.add(qualified)
            elif section in (".rodata", ".nv_fatbin", "__nv_relfatbin"):
                for match in _MANGLED.finditer(data, offset, offset + size):
                    qualified = itanium_qualified_name(match.group().decode("ascii"))
                    if qualified:
                        names.add(qualified)
        return names


def extension_kernel_names(own_code_dir: Path | None) -> frozenset[str]:
    """Qualified names of functions defined by loaded shared objects built from the bundle.

    Method: every loaded .so under ``extension_roots`` is read as ELF; a CUDA kernel's
    host stub carries the kernel's mangled name, and its registration string sits in
    the read-only data. Limits: a kernel is recognised by name only, so a bundle
    library that statically links a vendor library (cuBLAS, CUTLASS instantiations)
    makes those kernels count as its own; kernels compiled at run time by other means
    (NVRTC, CuPy raw kernels) and libraries built outside these roots are not recognised
    (they count as other); the partial demangler reads namespaces and the name, not
    overloads, so two kernels that differ only in parameters are one name.
    """
    roots = extension_roots(own_code_dir)
    if not roots:
        return frozenset()
    names: set[str] = set()
    for path in loaded_shared_objects():
        if any(_inside(path, root) for root in roots):
            names.update(shared_object_function_names(path))
    return frozenset(names)


def kernel_origins(own_code_dir: Path | None) -> KernelOrigins:
    """The submission's kernel names, as loaded in this process now."""
    own, foreign = triton_kernel_names(own_code_dir)
    return KernelOrigins(
        own_triton=own, foreign_triton=foreign, own_extension=extension_kernel_names(own_code_dir)
    )


# ----------------------------------------------------------------- the profiler pass


def _kind_from_name(name: str) -> str:
    lowered = name.lower()
    if lowered.startswith("memcpy"):
        return MEMCPY
    return MEMSET if lowered.startswith("memset") else KERNEL


_HOST_OP_TYPES = frozenset({"cpu_op", "user_annotation"})


def activities_from_profile(profiler: Any) -> list[DeviceActivity]:
    """The device activities of a finished ``torch.profiler.profile``, each with the
    innermost host op that was active when it was launched.

    A kernel's ``linked_correlation_id`` names the host op (``aten::mm``) that was active
    at launch, 0 when there was none. Only real ops are looked up: the profiler's own
    bookkeeping events ("Activity Buffer Request", "Lazy Function Loading") reuse those
    ids, id 0 included (seen on the H200: without this filter Triton kernels looked
    launched by them).
    """
    events = list(profiler.profiler.kineto_results.events())

    def activity_type(event: Any) -> str:
        return getattr(event, "activity_type", lambda: "")() or ""

    host_ops = {
        event.correlation_id(): event.name()
        for event in events
        if event.device_type() == DeviceType.CPU
        and activity_type(event) in _HOST_OP_TYPES
        and event.linked_correlation_id() == 0
        and event.correlation_id() > 0
    }
    activities = []
    for event in events:
        if event.device_type() != DeviceType.CUDA:
            continue
        name = event.name()
        kind = _ACTIVITY_KINDS.get(activity_type(event))
        if kind is None:
            if activity_type(event):  # annotations, syncs: not work
                continue
            kind = _kind_from_name(name)
        linked = event.linked_correlation_id()
        activities.append(
            DeviceActivity(
                name=name,
                duration_ns=max(0, int(event.duration_ns())),
                kind=kind,
                launched_by=host_ops.get(linked) if linked > 0 else None,
                stream=_stream_of(event),
            )
        )
    return activities


def _stream_of(event: Any) -> int | None:
    try:
        return int(event.device_resource_id())
    except (AttributeError, TypeError, ValueError):
        return None


_CURRENT_STREAMS: dict[int, int] = {}
"""Device index -> the profiler's id of the stream the harness calls candidates on,
found by ``prepare_monitoring``."""


class CudaFallbackMonitor:
    """Attributes the device time of calls made while it is active (CUDA), by kernel origin."""

    def __init__(
        self,
        *,
        own_code_dir: str | os.PathLike[str] | None = None,
        device: torch.device | None = None,
    ) -> None:
        self.own_code_dir = Path(own_code_dir) if own_code_dir is not None else None
        self.device = device
        self.call_activities: list[list[DeviceActivity]] = []

    @property
    def calls(self) -> int:
        """How many calls were monitored."""
        return len(self.call_activities)

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` under the profiler, the whole device synchronised before and inside.

        ``torch.cuda.synchronize`` waits for every stream of the device (side streams
        included). Other GPUs are not waited for: a worker process sees one GPU. (Not
        ``device_count()``: its first call caches a value in ``torch.cuda``, which the
        integrity guard reports as tampering.)
        """
        torch.cuda.synchronize(self.device)  # earlier work stays out of the region
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as profiler:
            try:
                result = fn()
            finally:
                torch.cuda.synchronize(self.device)
        self.call_activities.append(activities_from_profile(profiler))
        return result

    def report(self, *, q_bytes: int | None = None, top: int = 5) -> FallbackReport:
        """The own-kernel share over the calls after the first (``q_bytes`` is unused on CUDA:
        the split is by device time, which the profiler measures directly)."""
        steady = self.call_activities[1:] or self.call_activities
        report = attribution_report(
            chain.from_iterable(steady), kernel_origins(self.own_code_dir), top=top
        )
        busy = [busiest_stream_s(call) for call in steady]
        report.observed_call_s = min(busy) if busy and min(busy) > 0 else None
        current = _CURRENT_STREAMS.get(self.device.index or 0) if self.device else None
        if current is not None:
            elsewhere = [
                activity
                for call in self.call_activities
                for activity in call
                if activity.stream is not None and activity.stream != current
            ]
            if elsewhere:
                report.other_stream_activities = len(elsewhere)
                report.warnings.append(
                    f"work outside the current stream: {len(elsewhere)} kernels or copies of "
                    f"{len(self.call_activities)} calls ran on other streams; timed on all "
                    "streams (device-wide synchronise)"
                )
        return report


Monitor = FallbackMonitor | CudaFallbackMonitor


def busiest_stream_s(activities: Iterable[DeviceActivity]) -> float:
    """Seconds of device work on the busiest stream of one call: a lower bound of the
    call's device time that host gaps between launches (longer under the profiler) do not
    inflate and work spread over streams does not double."""
    per_stream: dict[int | None, int] = {}
    for activity in activities:
        per_stream[activity.stream] = per_stream.get(activity.stream, 0) + activity.duration_ns
    return max(per_stream.values(), default=0) * 1e-9


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
    torch.cuda.synchronize(device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
        torch.cuda.synchronize(device)
    # Which profiler stream id is the current stream: one tiny kernel launched on it.
    probe = torch.zeros(1, device=device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as profiler:
        probe.add_(1)
        torch.cuda.synchronize(device)
    streams = {a.stream for a in activities_from_profile(profiler) if a.kind == KERNEL}
    if len(streams) == 1 and None not in streams:
        _CURRENT_STREAMS[device.index or 0] = streams.pop()


def monitor_for(
    device: torch.device, *, own_code_dir: str | os.PathLike[str] | None = None
) -> Monitor:
    """The fallback monitor for candidate calls on ``device``; ``own_code_dir`` is the
    extracted bundle (on CUDA, kernels built from code there are the submission's)."""
    if device.type == "cuda":
        return CudaFallbackMonitor(own_code_dir=own_code_dir, device=device)
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
    monitor = monitor_for(device, own_code_dir=own_code_dir)
    for _ in range(calls):
        monitor.call(fn)
    return report_for(monitor, q_bytes=q_bytes)
