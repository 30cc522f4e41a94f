"""Fallback attribution on CUDA: how much of a candidate's calls' device time is its own
kernels'.

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

import copy
import os
import re
import sys
import sysconfig
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from types import FunctionType
from typing import Any

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from evaluator.code_origin import package_dir
from evaluator.elf_symbols import (
    cxx_qualified_name,
    loaded_shared_objects,
    mapped_shared_object_names,
    real_path,
    real_path_resolver,
    remember_real_paths,
    shared_object_function_names,
)
from evaluator.fallback_report import ALLOCATION_OPS, NO_KERNEL_WARNING, FallbackReport

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
    extension_reader: Callable[[], frozenset[str]] | None = field(
        default=None, repr=False, compare=False
    )
    """Reads ``own_extension`` when first needed, in place of the field (see
    ``extension_names``)."""

    def extension_names(self) -> frozenset[str]:
        """``own_extension``, or what ``extension_reader`` reads, once, when first asked: a
        report whose kernels are all launched by PyTorch or named as the bundle's Triton
        functions never needs them, and reading them reads /proc/self/maps (thousands of
        lines in a process with CUDA) at every shape's report (harness 0.3.8)."""
        if self.extension_reader is None:
            return self.own_extension
        names = self.__dict__.get("_extension_names")
        if names is None:
            names = self.extension_reader()
            object.__setattr__(self, "_extension_names", names)  # frozen: set once, here
        return names


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


def classify_activity(
    activity: DeviceActivity,
    origins: KernelOrigins,
    matches: Callable[[str, frozenset[str]], str | None] = _matches_triton_name,
) -> str:
    """OWN, OTHER or NEUTRAL (see the module docstring for the rules and their order);
    ``matches`` is ``_matches_triton_name`` or a memo of it."""
    launcher = activity.launched_by or ""
    if activity.kind == MEMSET:
        return NEUTRAL
    if launcher.startswith("aten::") and launcher[6:] in ALLOCATION_OPS:
        return NEUTRAL
    if activity.kind == MEMCPY or launcher.startswith("aten::"):
        return OTHER
    triton = matches(activity.name, origins.own_triton)
    if triton is not None:
        return OTHER if triton in origins.foreign_triton else OWN
    if cxx_qualified_name(activity.name) in origins.extension_names():
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
    own_activities = 0
    others: dict[str, KernelStats] = {}
    warnings: list[str] = []
    # A call launches the same few kernel names thousands of times (a per-token loop):
    # the name match is a pure function of the name, worked out once per name.
    memo: dict[str, str | None] = {}

    def matches(name: str, names: frozenset[str]) -> str | None:
        if name not in memo:
            memo[name] = _matches_triton_name(name, names)
        return memo[name]

    for activity in activities:
        verdict = classify_activity(activity, origins, matches)
        totals[verdict] += activity.duration_ns
        if verdict == OWN:
            own_activities += 1
        if verdict != OTHER:
            continue
        name = activity.name[:_NAME_CHARS]
        stats = others.setdefault(name, KernelStats(launched_by=activity.launched_by))
        stats.calls += 1
        stats.time_ns += activity.duration_ns
        clash = matches(activity.name, origins.own_triton)
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
        own_activities=own_activities,
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


def _is_own_file(
    path: str,
    own_root: str | None,
    installed: tuple[str, ...],
    resolve: Callable[[str], str] = real_path,
) -> bool:
    """Inside the bundle; without a bundle directory, anything not installed or generated
    (``resolve``: how a path is made real, ``real_path`` or one scan's resolver)."""
    real = resolve(path)
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


class ModuleScanMemo:
    """What ``triton_kernel_names`` found outside the bundle, kept between the shapes of one
    operator's child while the loaded modules stay the same.

    The scan reads every global of about two thousand modules at each shape's report
    (about 11 ms on the H200's host, `bench/module_scan.py`; 56 shapes a round). Outside
    the bundle the names it finds change only when a module is loaded or unloaded, or when
    a global is added to or removed from one: the key is each module's identity, its
    globals' count and whether it names a file (``_modules_key``). The bundle's own modules
    are read in full at every scan (a kernel it builds later is found then), and the files
    of their kernels resolved afresh.

    What it does not see again: a global of a module outside the bundle rebound, without
    the count changing, to a Triton kernel defined outside the bundle after the first scan
    (installed code defines its kernels when it is imported; a module it loads later is a
    new key). Such a kernel is not the bundle's either way; only its name is missed as a
    clash with an own kernel of the same name. Held by the child's harness (the shape loop),
    which the candidate's code cannot reach (no frames, no object lists).
    """

    __slots__ = ("key", "bundle_modules", "own", "foreign")

    def __init__(self) -> None:
        self.key: tuple[Any, ...] | None = None
        self.bundle_modules: list[Any] = []
        self.own: frozenset[str] = frozenset()
        self.foreign: frozenset[str] = frozenset()


def _modules_key(own_root: str | None) -> tuple[Any, ...]:
    """Every loaded module by identity, its globals' count and whether it names a file (the
    full scan reads the modules that do). Read from each module's ``__dict__``, not through
    ``getattr``, in one comprehension: it is made at every shape's report, and for 2,000
    modules it took about 1 ms through ``getattr`` on the development machine's CPU, a
    third of that this way."""
    return (
        own_root,
        *[
            (id(module), len(namespace), type(namespace.get("__file__")) is str)
            if type(namespace := getattr(module, "__dict__", None)) is dict
            else (id(module), -1, False)
            for module in list(sys.modules.values())
        ],
    )


def triton_kernel_names(
    own_code_dir: Path | None, memo: ModuleScanMemo | None = None
) -> tuple[frozenset[str], frozenset[str]]:
    """(own, foreign) names of Triton kernels reachable from loaded modules.

    Own: JIT functions (or autotuners, heuristics around them) whose function's source
    file lies inside ``own_code_dir`` (the bundle), found in the globals of the bundle's
    modules and one level inside their classes, dicts and lists. Foreign: those defined
    anywhere else, found in every other module's globals (inductor's generated modules
    included; Triton's own language helpers excluded). Without ``own_code_dir``, own means
    "not installed, not generated". With a ``memo`` (``ModuleScanMemo``), the modules
    outside the bundle are read again only when the loaded modules changed.
    """
    try:
        from triton.runtime.jit import KernelInterface
    except ImportError:
        return frozenset(), frozenset()
    own_root = os.path.realpath(own_code_dir) if own_code_dir is not None else None
    installed = _installed_roots()
    # Each folder resolved once for the whole scan, not each module's path in full.
    resolve = real_path_resolver()
    own: set[str] = set()
    foreign: set[str] = set()

    def read(module: Any, *, nested: bool) -> None:
        for value in _module_values(module, nested=nested):
            function = _kernel_function(value, KernelInterface)
            if function is None:
                continue
            if _is_own_file(function.__code__.co_filename, own_root, installed, resolve):
                own.add(function.__name__)
            else:
                foreign.add(function.__name__)

    key = _modules_key(own_root) if memo is not None else None
    if memo is None or key != memo.key:
        # triton.language's JIT functions are device helpers (tl.softmax, tl.sum), inlined
        # into kernels, never launched: a kernel named "softmax" must not clash with them.
        triton_dir = package_dir("triton")
        bundle_modules = []
        for module in list(sys.modules.values()):
            filename = getattr(module, "__file__", None)
            if not isinstance(filename, str):
                continue
            if triton_dir and resolve(filename).startswith(triton_dir):
                continue
            if _is_own_file(filename, own_root, installed, resolve):
                bundle_modules.append(module)  # read below, at every scan
                continue
            read(module, nested=False)
        if memo is not None:
            memo.key, memo.bundle_modules = key, bundle_modules
            memo.own, memo.foreign = frozenset(own), frozenset(foreign)
    else:
        own.update(memo.own)
        foreign.update(memo.foreign)
        bundle_modules = memo.bundle_modules
    for module in bundle_modules:
        read(module, nested=True)
    return frozenset(own), frozenset(foreign)


def bundle_triton_names(own_code_dir: Path) -> frozenset[str]:
    """Names of the Triton kernels (JIT functions, or autotuners and heuristics around
    them) defined in the bundle and found in the globals of modules whose file, as named,
    lies in ``own_code_dir``, and one level inside their classes, dicts and lists.

    A quick first look (``CudaFallbackMonitor.first_call_launched_own``): no module's file
    is resolved (only the kernels' own files), so it costs a fraction of
    ``triton_kernel_names``, and it finds no foreign names. A name it gives may be one the
    full look would not count as own, and the other way round: a match here only leaves
    a shape watched on every call, as it was before the first call could decide it."""
    try:
        from triton.runtime.jit import KernelInterface
    except ImportError:
        return frozenset()
    own_root = real_path(str(own_code_dir))
    # The folder as named and as resolved: a module's file is compared as Python named it.
    roots = (os.path.join(str(own_code_dir), ""), os.path.join(own_root, ""))
    installed = _installed_roots()
    names: set[str] = set()
    for module in list(sys.modules.values()):
        # The file as the module's globals name it (no module-level __getattr__ asked): a
        # module missed here is only a name missed by this quick look.
        namespace = getattr(module, "__dict__", None)
        filename = namespace.get("__file__") if type(namespace) is dict else None
        if type(filename) is not str or not filename.startswith(roots):
            continue
        for value in _module_values(module, nested=True):
            function = _kernel_function(value, KernelInterface)
            if function is not None and _is_own_file(
                function.__code__.co_filename, own_root, installed
            ):
                names.add(function.__name__)
    return frozenset(names)


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


def kernel_origins(own_code_dir: Path | None, memo: ModuleScanMemo | None = None) -> KernelOrigins:
    """The submission's kernel names, as loaded in this process now (``memo``: see
    ``ModuleScanMemo``)."""
    own, foreign = triton_kernel_names(own_code_dir, memo)
    return KernelOrigins(
        own_triton=own,
        foreign_triton=foreign,
        extension_reader=lambda: extension_kernel_names(own_code_dir),
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
    events = profiler.profiler.kineto_results.events()
    cpu, cuda = DeviceType.CPU, DeviceType.CUDA
    # One pass, each accessor called at most once per event, cheapest test first, and a
    # host op's type and name read only if a device activity names it: a call of a
    # per-token loop records hundreds of thousands of host events, and every accessor is
    # a native call of a microsecond or more. Same result as the plain reading: of the
    # host ops with one correlation id, the last one of a host-op type.
    hosts: dict[int, Any] = {}  # correlation id -> its host event, or a list of them
    device_events = []
    for event in events:
        device = event.device_type()
        if device == cpu:
            if event.linked_correlation_id() != 0:
                continue
            correlation = event.correlation_id()
            if correlation > 0:
                earlier = hosts.get(correlation)
                if earlier is None:
                    hosts[correlation] = event
                elif type(earlier) is list:
                    earlier.append(event)
                else:
                    hosts[correlation] = [earlier, event]
        elif device == cuda:
            device_events.append(event)
    names: dict[int, str | None] = {}

    def host_op(correlation: int) -> str | None:
        if correlation not in names:
            entry = hosts.get(correlation)
            found = entry if type(entry) is list else [entry] if entry is not None else []
            names[correlation] = next((e.name() for e in reversed(found) if _is_host_op(e)), None)
        return names[correlation]

    activities = []
    for event in device_events:
        name = event.name()
        activity_type = _activity_type(event)
        kind = _ACTIVITY_KINDS.get(activity_type)
        if kind is None:
            if activity_type or _is_user_annotation(event):  # annotations, syncs: not work
                continue
            kind = _kind_from_name(name)
        linked = event.linked_correlation_id()
        activities.append(
            DeviceActivity(
                name=name,
                duration_ns=max(0, int(event.duration_ns())),
                kind=kind,
                launched_by=host_op(linked) if linked > 0 else None,
                stream=_stream_of(event),
            )
        )
    return activities


def _activity_type(event: Any) -> str:
    """The event's Kineto activity type ("cpu_op", "kernel", ...), "" where PyTorch does not
    give it: torch 2.11's events have no ``activity_type`` (seen on the H200, session 12)."""
    return getattr(event, "activity_type", lambda: "")() or ""


_PROFILER_BOOKKEEPING = frozenset({"Activity Buffer Request", "Lazy Function Loading"})
"""Host events of the profiler's own that reuse a host op's correlation id."""


def _is_host_op(event: Any) -> bool:
    """Whether a host event with a kernel's linked id is the op that launched it: by its
    activity type where the event has one; where it has none, any host event but the
    profiler's own bookkeeping (hidden events, or named as they are)."""
    activity_type = _activity_type(event)
    if activity_type:
        return activity_type in _HOST_OP_TYPES
    if getattr(event, "is_hidden_event", lambda: False)():
        return False
    return event.name() not in _PROFILER_BOOKKEEPING


def _is_user_annotation(event: Any) -> bool:
    """A ``record_function`` region's span on the device timeline: never work of its own.
    Only asked where the event has no activity type; without this, the span of a region
    that a bundle names after its own Triton kernel would count as own device time."""
    return bool(getattr(event, "is_user_annotation", lambda: False)())


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
        calls: int | None = None,
        scans: ModuleScanMemo | None = None,
    ) -> None:
        self.own_code_dir = Path(own_code_dir) if own_code_dir is not None else None
        self.device = device
        self.scans = scans
        """The child's ``ModuleScanMemo``, shared by its shapes' monitors (None: every
        report reads every loaded module)."""
        self.call_activities: list[list[DeviceActivity]] = []
        self.first_call_device_only = calls is not None and calls > 1
        """With more calls to come (``calls``), the first is profiled without the host's
        ops: the share is taken over the calls after the first, and of the first only
        its activities' streams are read, which the device activity alone gives. The
        host-op activity is most of the profiler's cost for a call of many small
        kernels (bench/profiler_cost.py: 11.7 of 13.3 s for a call the reference makes
        in 2.1 s unwatched, on the H200)."""
        self._first_call_report: tuple[int, FallbackReport] | None = None
        """``first_call_report``'s (its ``top``, the report), once made."""

    @property
    def calls(self) -> int:
        """How many calls were monitored."""
        return len(self.call_activities)

    def first_call_launched_own(self) -> bool:
        """Whether a device activity of the first watched call is the bundle's own
        (``classify_activity`` says OWN).

        The first call of several is profiled for its device activity only, so no kernel
        of it has a launcher: an own kernel's name launched inside an aten op counts as own
        here, which can only make this True (the shape is then watched on every call, as
        any other). A quick look first: a kernel named after a Triton kernel found in the
        bundle's own modules answers True without reading every loaded module (the honest
        case, which then reads them once, at its report, as before); otherwise the origins
        are read in full and the first call's report is made (kept for
        ``first_call_report``): its count of own activities is the exact answer."""
        if not self.call_activities:
            raise RuntimeError("no call was watched")
        names = {activity.name for activity in self.call_activities[0] if activity.kind == KERNEL}
        if names:
            quick = bundle_triton_names(self.own_code_dir) if self.own_code_dir else frozenset()
            if any(_matches_triton_name(name, quick) is not None for name in names):
                return True
        return self.first_call_report().own_activities > 0

    def first_call_report(self, *, q_bytes: int | None = None, top: int = 5) -> FallbackReport:
        """The report of the first watched call alone (kernel launchers are unknown where
        it was profiled for its device activity only), made once and handed out as a copy
        (``q_bytes`` is unused)."""
        if not self.call_activities:
            raise RuntimeError("no call was watched")
        if self._first_call_report is None or self._first_call_report[0] != top:
            origins = kernel_origins(self.own_code_dir, self.scans)
            report = self._report_over(self.call_activities[:1], origins, top=top)
            self._first_call_report = (top, report)
        return copy.deepcopy(self._first_call_report[1])

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` under the profiler, the whole device synchronised before and inside.

        ``torch.cuda.synchronize`` waits for every stream of the device (side streams
        included). Other GPUs are not waited for: a worker process sees one GPU. (Not
        ``device_count()``: its first call caches a value in ``torch.cuda``, which the
        integrity guard reports as tampering.)
        """
        torch.cuda.synchronize(self.device)  # earlier work stays out of the region
        activities = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
        config = None
        if self.first_call_device_only and not self.call_activities:
            activities = [ProfilerActivity.CUDA]  # its kernels' launchers are not read
            config = device_only_profiler_config()
        with profile(activities=activities, experimental_config=config) as profiler:
            try:
                result = fn()
            finally:
                torch.cuda.synchronize(self.device)
        self.call_activities.append(activities_from_profile(profiler))
        return result

    def report(self, *, q_bytes: int | None = None, top: int = 5) -> FallbackReport:
        """The own-kernel share over the calls after the first (``q_bytes`` is unused on CUDA:
        the split is by device time, which the profiler measures directly)."""
        if self.first_call_device_only and len(self.call_activities) < 2:
            # Its first call's launchers were not recorded: no share can come of it alone.
            raise RuntimeError("the monitor was told of more calls than it watched")
        steady = self.call_activities[1:] or self.call_activities
        return self._report_over(steady, kernel_origins(self.own_code_dir, self.scans), top=top)

    def _report_over(
        self, steady: list[list[DeviceActivity]], origins: KernelOrigins, *, top: int
    ) -> FallbackReport:
        """The report of the calls ``steady`` (the share, top kernels, the fastest call);
        work outside the current stream is counted over every watched call."""
        report = attribution_report(chain.from_iterable(steady), origins, top=top)
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


def device_only_profiler_config() -> Any:
    """The profiler's configuration for a call profiled for its device activity only:
    without external correlation, the ids that tie each kernel to the host op that launched
    it, which such a call does not read (its host ops are not recorded). None (the default
    configuration) where this torch has no such switch."""
    try:
        from torch._C._profiler import _ExperimentalConfig

        return _ExperimentalConfig(disable_external_correlation=True)
    except (ImportError, TypeError):
        return None


def busiest_stream_s(activities: Iterable[DeviceActivity]) -> float:
    """Seconds of device work on the busiest stream of one call: a lower bound of the
    call's device time that host gaps between launches (longer under the profiler) do not
    inflate and work spread over streams does not double."""
    per_stream: dict[int | None, int] = {}
    for activity in activities:
        per_stream[activity.stream] = per_stream.get(activity.stream, 0) + activity.duration_ns
    return max(per_stream.values(), default=0) * 1e-9


def prepare_cuda_monitoring(device: torch.device) -> None:
    """Start the profiler once on ``device`` (CUDA) and find the profiler's id of the
    current stream (see ``evaluator.fallback.prepare_monitoring``); resolve the files of
    the installed code loaded so far once (``remember_real_paths``)."""
    files = [getattr(module, "__file__", None) for module in list(sys.modules.values())]
    # The interpreter's own folders only (not every "site-packages" on sys.path, which
    # could be one the sandboxed user can write).
    paths = sysconfig.get_paths()
    roots = {paths.get(key) for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    remember_real_paths(
        [f for f in files if isinstance(f, str)] + (mapped_shared_object_names() or []),
        [os.path.realpath(root) for root in roots if root],
    )
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
