"""Fallback attribution on the CPU: how much of a candidate's call is PyTorch compute, not
its own kernels.

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

Every "time" of a share is counted time (``evaluator.counted_time``), not the wall clock:
the calling thread's wall time less its waits for a CPU, so other processes' load does not
move a share, while a sleep, a join on a helper thread doing the work, or a pipe to work
done elsewhere still count against the call. The counted time of each whole call is kept
too, for ``observed_call_s`` (the timed calls' counted time is compared with it).
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
from _thread import get_ident as _thread_id
from collections.abc import Callable, Mapping
from types import CodeType, FrameType
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from evaluator.code_origin import genuine, package_dir
from evaluator.counted_time import CountedClock, Mark
from evaluator.fallback_report import ALLOWED_OPS, FallbackReport, OpStats


def op_name(func: Any) -> str:
    """'aten.mean.dim' style name of an aten overload."""
    return str(func)


def is_allowed_op(func: Any) -> bool:
    """Whether an aten op is an allocation, a view or metadata (not PyTorch compute)."""
    packet = getattr(func, "overloadpacket", None)
    name = getattr(packet, "__name__", None) or str(func).split(".")[1]
    return name in ALLOWED_OPS


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
        self.clock: CountedClock | None = None
        """The watched call's clock (both modes run in the calling thread only)."""

    def seconds_since(self, mark: Mark) -> float:
        """Counted seconds of a PyTorch compute call since ``mark`` (from ``mark``)."""
        return self.clock.since(mark, enclose=False)[0] if self.clock is not None else 0.0

    def mark(self) -> Mark:
        """Now, on the watched call's clock, for a PyTorch compute call."""
        return self.clock.mark(enclose=False) if self.clock is not None else (0, 0, None)


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
        start = self.ledger.mark()
        result = func(*args, **kwargs)
        elapsed = self.ledger.seconds_since(start)
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
        start = self.ledger.mark()
        try:
            return func(*args, **kwargs)
        finally:
            elapsed = self.ledger.seconds_since(start)
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
    """CPU: the counted time (``CountedClock``) inside launches of the bundle's own Triton
    kernels.

    While active, the interpreter's launch is replaced by a wrapper around the launch
    bound by ``bind_interpreter``; a launch counts when its JIT function's source file lies
    in the bundle's folder (autotuning and heuristics end in the same launch)."""

    def __init__(self, own_code_dir: str | os.PathLike[str]) -> None:
        self.own_dir = os.path.join(os.path.realpath(own_code_dir), "")
        self.seconds = 0.0
        self.launches = 0
        """Launches of the bundle's own kernels (outermost ones, in any thread)."""
        self._depth = 0
        self._verdicts: dict[CodeType, bool] = {}
        self._saved: Any = None
        self.call_clock: CountedClock | None = None
        """The watched call's clock, used by launches in the thread that made the call."""
        self.call_thread = 0

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
            clock.launches += 1
            # The call's clock, or one of its own in another thread (a clock is a thread's).
            call_clock = clock.call_clock
            with (
                contextlib.nullcontext(call_clock)
                if call_clock is not None and _thread_id() == clock.call_thread
                else CountedClock()
            ) as counted:
                start = counted.mark()
                try:
                    return true_run(kernel, *args, **kwargs)
                finally:
                    clock._depth -= 1
                    clock.seconds += counted.since(start)[0]

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
        dirs = tuple(d for d in (package_dir(p) for p in ignored_packages) if d)
        self.ledger = _Ledger()
        self._dispatch = _ComputeDispatchMode(self.ledger, dirs, package_dir("torch") or "\0")
        self._function = _CallTimingMode(self.ledger)
        self._kernels = (
            _OwnKernelClock(own_code_dir)
            if own_code_dir is not None and bind_interpreter()
            else None
        )
        self.total_s = 0.0
        """Counted seconds of all watched calls (``call_counted_s``)."""
        self.call_s: list[float] = []
        """Wall seconds of each watched call (no share uses them)."""
        self.call_counted_s: list[float] = []
        """Counted seconds of each watched call (``CountedClock``: the calling thread's
        wall time less its waits for a CPU): every share's denominator."""
        self.call_waited_s: list[float] = []
        """Seconds of each watched call that the calling thread waited for anything but a
        CPU (included in ``call_counted_s``)."""
        self.call_compute_s: list[float] = []
        """Counted seconds of each watched call spent in PyTorch compute."""
        self.call_own_s: list[float] = []
        """Counted seconds of each watched call inside the bundle's own Triton kernels (with
        ``own_code_dir`` and an interpreter; else empty)."""
        self.call_own_launches: list[int] = []
        """Launches of the bundle's own Triton kernels in each watched call (with
        ``own_code_dir`` and an interpreter; else empty)."""

    @property
    def calls(self) -> int:
        """How many calls were monitored."""
        return len(self.call_s)

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` under both modes, adding its counted time to the total."""
        compute_before = self.ledger.compute_s
        kernels = self._kernels
        own_before = kernels.seconds if kernels is not None else 0.0
        launches_before = kernels.launches if kernels is not None else 0
        with CountedClock() as clock:
            self.ledger.clock = clock
            if kernels is not None:
                kernels.call_clock, kernels.call_thread = clock, _thread_id()
            try:
                start = clock.mark()
                with self._function, self._dispatch, kernels or contextlib.nullcontext():
                    result = fn()
                seconds, wall, waited = clock.since(start)
            finally:
                self.ledger.clock = None
                if kernels is not None:
                    kernels.call_clock = None
        self.call_s.append(wall)
        self.call_counted_s.append(seconds)
        self.call_waited_s.append(waited)
        self.total_s += seconds
        self.call_compute_s.append(self.ledger.compute_s - compute_before)
        if kernels is not None:
            self.call_own_s.append(kernels.seconds - own_before)
            self.call_own_launches.append(kernels.launches - launches_before)
        return result

    def first_call_launched_own(self) -> bool | None:
        """Whether the first watched call launched a Triton kernel of the bundle's own (in
        the thread that made the call or any other); None where that cannot be told (no
        bundle folder or no interpreter: then nothing is the bundle's own kernel here, and
        the share is taken by time and bytes alone)."""
        if self._kernels is None or not self.call_own_launches:
            return None
        return self.call_own_launches[0] > 0

    def first_call_report(self, *, q_bytes: int | None, top: int = 5) -> FallbackReport:
        """The report of the first watched call alone (``report``, when it is the only one)."""
        if self.calls != 1:
            raise RuntimeError("the first call's report is asked after more calls were watched")
        return self.report(q_bytes=q_bytes, top=top)

    def _median_part(self, seconds: list[float]) -> float | None:
        """The median over the watched calls of ``seconds`` (one entry per call) as a share
        of the call's counted time; None without a timed call."""
        parts = [
            part / elapsed
            for elapsed, part in zip(self.call_counted_s, seconds, strict=True)
            if elapsed > 0
        ]
        return statistics.median(parts) if parts else None

    def report(self, *, q_bytes: int | None, top: int = 5) -> FallbackReport:
        """The shares (by time and by bytes, ``q_bytes`` per call) and the top compute ops."""
        ledger = self.ledger
        calls = max(1, self.calls)
        # The median call's share: a call that waited (for a CPU before 0.2.4; for a page
        # from disk, say) puts that wait outside PyTorch's ops, and over a few calls made
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
        # Counted, as the CPU timer's figure it is compared with (evaluator.measure): a
        # call that waited for a CPU on a loaded host is not slower for it.
        steady = self.call_counted_s[1:] or self.call_counted_s
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
