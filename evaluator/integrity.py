"""The child's self-protection against a candidate that patches the harness or its tools.

The candidate runs in the evaluation child's own process, so it can reach every Python
object of the harness. Before the candidate is imported, the child takes an
:class:`IntegrityGuard`: a snapshot of the namespaces the measurement depends on (the
clocks in ``time``, ``torch``'s functions and ``torch.Tensor``'s methods, ``torch.cuda``'s
synchronise and events, ``nn.Module``, the builtins, every loaded ``evaluator`` module and
the classes and functions defined in it, down to their code objects), of the PyTorch
kernel registrations made from Python (``torch.library``), of the active torch modes and
of the trace/profile hooks. After each candidate call the guard is checked; any change is
a :class:`TamperingError`, and the operator fails with the change named.

It also watches for Python threads that the candidate started: work still running after a
call has returned escapes the timer and the correctness check, so a thread alive after a
call is an :class:`OutsideWorkError`.

Limits, stated plainly: this is a tripwire at the Python level, inside the process it
guards. Native code (ctypes writes into the interpreter, C++ operator registrations, a
hijacked CUDA driver), a guard disabled before it looks, or a change made and undone
between two checks are out of its reach; the sandbox of the worker and a reference
computed outside the candidate's process are the real boundary.
"""

from __future__ import annotations

import _thread
import copyreg
import os
import sys
import sysconfig
import types
from collections.abc import Callable, Iterable
from typing import Any

from evaluator.code_origin import genuine
from evaluator.errors import EvaluationError

WATCHED_STDLIB = (
    "builtins",
    "time",
    "os",
    "json",
    "hmac",
    "hashlib",
    "math",
    "statistics",
    "bisect",
    "functools",
    "threading",
    "secrets",
    "random",
)
"""Standard modules whose functions the harness calls while it measures or reports."""
WATCHED_TORCH = (
    "torch",
    "torch.nn.functional",
    "torch.cuda",
    "torch.library",
    "torch.overrides",
)
GROWING_NAMESPACES = frozenset({"torch", "torch.cuda", "torch.library", "torch.overrides"})
"""Packages that add attributes by themselves (lazily imported submodules, caches): only a
changed or removed name counts there, not a new one."""
CRITICAL = frozenset(
    {
        "time",
        "torch.cuda",
        "torch.cuda.Event",
        "evaluator.timing",
        "evaluator.correctness",
        "evaluator.counted_time",
    }
)
"""Namespaces checked after every timed call (the full check runs after the loop)."""
TORCH_REWRAPS = frozenset(
    {
        "torch.manual_seed",
        "torch.nn.Module.__init__",
        "torch.nn.Module.__setstate__",
        "torch.nn.Module.___needs_generation_tag_patch",
    }
)
"""Names that importing ``torch._dynamo`` or ``torch.compile`` rewrap by itself: a change
there is accepted when the new value is code from the torch package."""
_MISSING = object()


class TamperingError(EvaluationError):
    """The candidate changed the harness, its clocks or PyTorch (the operator fails)."""

    code = "eval:tampering"


class OutsideWorkError(EvaluationError):
    """The candidate left work running after its call returned (the shape is incorrect)."""

    code = "eval:outside-work"


def _code_of(value: Any) -> tuple[Any, Any, Any] | None:
    """A function's code, defaults and keyword defaults (a swapped ``__code__`` shows)."""
    function = getattr(value, "__func__", value)
    if isinstance(function, types.FunctionType):
        return (function.__code__, function.__defaults__, function.__kwdefaults__)
    return None


class _Namespace:
    """One watched namespace: a module's or a class's ``__dict__`` and a copy of it."""

    __slots__ = ("label", "namespace", "saved", "codes", "allow_new")

    def __init__(self, label: str, namespace: Any, *, allow_new: bool) -> None:
        self.label = label
        self.namespace = namespace
        self.saved = dict(namespace)
        self.allow_new = allow_new
        self.codes = {}
        for name, value in self.saved.items():
            code = _code_of(value)
            if code is not None:
                self.codes[name] = code

    def functions(self) -> Iterable[tuple[Any, str]]:
        """(function, label) for each function watched here, methods' own functions too."""
        for name in self.codes:
            value = self.saved[name]
            yield getattr(value, "__func__", value), f"{self.label}.{name}"

    def changes(self, *, codes: bool = True) -> list[str]:
        """Names that were replaced, removed, added, or (``codes``) whose function code was
        swapped."""
        found = []
        current = self.namespace
        for name, value in self.saved.items():
            now = current.get(name, _MISSING)
            if now is not value:
                if _is_private_state(name, value, now):
                    continue
                if not _is_torch_rewrap(f"{self.label}.{name}", now):
                    found.append(f"{self.label}.{name}")
            elif codes and name in self.codes and _code_of(value) != self.codes[name]:
                found.append(f"{self.label}.{name}.__code__")
        if not self.allow_new and len(current) != len(self.saved):
            # A submodule imported later appears as a new module attribute: not a change.
            found.extend(
                f"{self.label}.{name}"
                for name in current
                if name not in self.saved
                and not isinstance(current[name], types.ModuleType)
                and not _is_torch_rewrap(f"{self.label}.{name}", current[name])
            )
        return found


def _is_private_state(name: str, before: Any, after: Any) -> bool:
    """A private, non-callable value (a cache such as ``torch.cuda._cached_device_count``,
    filled lazily on first use): library state, not code the measurement runs."""
    return (
        name.startswith("_")
        and not callable(before)
        and not callable(after)
        and not isinstance(after, types.ModuleType)
    )


def _torch_dir() -> str | None:
    torch = sys.modules.get("torch")
    path = getattr(torch, "__file__", None)
    return os.path.dirname(os.path.realpath(path)) + os.sep if path else None


def _is_torch_rewrap(label: str, value: Any) -> bool:
    """Whether a change of ``label`` to ``value`` is one PyTorch makes itself."""
    if label not in TORCH_REWRAPS:
        return False
    code = _code_of(value)
    if code is None and label.endswith("___needs_generation_tag_patch"):
        return isinstance(value, bool)
    torch_dir = _torch_dir()
    return bool(code and torch_dir and os.path.realpath(code[0].co_filename).startswith(torch_dir))


def _classes_of(module: types.ModuleType) -> Iterable[type]:
    for value in list(vars(module).values()):
        if isinstance(value, type) and value.__module__ == module.__name__:
            yield value


def _thread_ids() -> set[int]:
    return set(sys._current_frames())


def _signal_handlers() -> dict[int, Any]:
    """Each signal's Python handler: a handler is called with the frame that was running,
    which may be the harness's (a timer signal during its timing loop, say)."""
    import signal

    handlers = {}
    for number in signal.valid_signals():
        try:
            handlers[int(number)] = signal.getsignal(number)
        except (OSError, ValueError):
            continue
    return handlers


def _signal_name(number: int) -> str:
    """SIGALRM for 14, or the number."""
    import signal

    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


class IntegrityGuard:
    """Snapshot of what the measurement depends on, taken before the candidate is imported.

    ``check()`` raises :class:`TamperingError` naming every change; ``check_threads()``
    raises :class:`OutsideWorkError` when a Python thread started after the snapshot is
    still alive. ``extra`` adds namespaces to watch (a label and its ``__dict__``).
    """

    def __init__(self, *, extra: Iterable[tuple[str, Any]] = ()) -> None:
        self._namespaces: list[_Namespace] = []
        self._torch_settings: dict[str, Any] | None = None
        if sys.modules.get("torch") is not None:
            from evaluator import torch_settings  # loaded first: watched with the rest

            self._torch_settings = torch_settings.snapshot()
        for name in (*WATCHED_STDLIB, *WATCHED_TORCH):
            module = sys.modules.get(name)
            if module is not None:
                self._watch(name, vars(module), allow_new=name in GROWING_NAMESPACES)
        torch = sys.modules.get("torch")
        if torch is not None:
            self._watch_class("torch.Tensor", torch.Tensor)
            self._watch_class("torch.nn.Module", torch.nn.Module)
            self._watch_class("torch.cuda.Event", torch.cuda.Event)
        for name, module in sorted(sys.modules.items()):
            if (name == "evaluator" or name.startswith("evaluator.")) and module is not None:
                self._watch(name, vars(module), allow_new=False)
                for cls in _classes_of(module):
                    self._watch_class(f"{name}.{cls.__qualname__}", cls)
        for label, namespace in extra:
            self._watch(label, namespace, allow_new=False)
        # Assignments to the watched functions' code, recorded by confine_bundle_code's
        # audit hook as they happen; once it records them, check() reads this instead of
        # each function's code (see record_code_swaps).
        self._code_swaps: list[str] = []
        self._codes_by_hook = False
        self._library_impls = self._impls()
        self._module_hooks = self._global_module_hooks()
        self._signals = _signal_handlers()
        self._modes = self._mode_depths()
        self._threads = _thread_ids()

    def record_code_swaps(self) -> tuple[dict[int, tuple[Any, str]], list[str]]:
        """For an audit hook that records the code swaps of the functions watched here:
        (id(function) -> (function, its label), the list to append "label.attribute" to).
        From now on ``check`` reads that list instead of every function's code: in a
        process with audit hooks, reading a function's ``__code__``, ``__defaults__`` or
        ``__kwdefaults__`` is itself an audit event, which made the full check three times
        slower in the evaluation child; assigning one is one too, so a swap is seen when
        it is made, even one undone before the next check. Only ``confine_bundle_code``
        calls this, after installing its hook."""
        self._codes_by_hook = True
        functions = {
            id(function): (function, label)
            for namespace in self._namespaces
            for function, label in namespace.functions()
        }
        return functions, self._code_swaps

    def _watch(self, label: str, namespace: Any, *, allow_new: bool) -> None:
        # A class __dict__ is a read-only proxy that follows the class; it is read live.
        self._namespaces.append(_Namespace(label, namespace, allow_new=allow_new))

    def _watch_class(self, label: str, cls: type) -> None:
        # copy.copy and pickle cache a class's slot names in its __dict__ on first use
        # (copyreg._slotnames); the harness copies its own objects (a FallbackReport)
        # while a candidate runs, so the cache is filled before the snapshot, not read as
        # a new attribute the candidate added.
        try:
            copyreg._slotnames(cls)  # type: ignore[attr-defined]
        except (TypeError, AttributeError):  # a class that refuses attributes: nothing cached
            pass
        self._watch(label, cls.__dict__, allow_new=False)

    @staticmethod
    def _impls() -> frozenset[str]:
        library = sys.modules.get("torch.library")
        return frozenset(getattr(library, "_impls", ()) or ())

    @staticmethod
    def _global_module_hooks() -> dict[str, tuple[int, ...]]:
        """The hooks every ``nn.Module`` call runs (``register_module_forward_hook`` and
        kin): a forward hook may replace any module's output, the reference's included."""
        module = sys.modules.get("torch.nn.modules.module")
        hooks: dict[str, tuple[int, ...]] = {}
        for name in dir(module) if module is not None else ():
            value = getattr(module, name, None)
            if name.startswith("_global_") and isinstance(value, dict):
                hooks[name] = tuple(sorted(map(id, value.values())))
        return hooks

    @staticmethod
    def _mode_depths() -> tuple[int, int]:
        torch = sys.modules.get("torch")
        if torch is None:
            return (0, 0)
        return (torch._C._len_torch_function_stack(), torch._C._len_torch_dispatch_stack())

    def changes(self) -> list[str]:
        """Every change since the snapshot, named ('time.perf_counter_ns', ...)."""
        found: list[str] = list(dict.fromkeys(self._code_swaps))
        for namespace in self._namespaces:
            found.extend(namespace.changes(codes=not self._codes_by_hook))
        # Kernels of the candidate's own namespaces are its business; a Python-registered
        # kernel for an aten op would change what the reference computes.
        added = self._impls() - self._library_impls
        found.extend(
            f"torch.library kernel {impl}" for impl in sorted(added) if impl.startswith("aten/")
        )
        hooks = self._global_module_hooks()
        found.extend(
            f"torch.nn.modules.module.{name} (a global module hook)"
            for name in sorted(hooks)
            if hooks[name] != self._module_hooks.get(name, ())
        )
        signals = _signal_handlers()
        found.extend(
            f"the handler of signal {_signal_name(number)}"
            for number in sorted(set(signals) | set(self._signals))
            if signals.get(number) is not self._signals.get(number)
        )
        if self._mode_depths() != self._modes:
            found.append("an active torch function/dispatch mode")
        if self._torch_settings is not None:
            from evaluator import torch_settings

            found.extend(
                f"PyTorch's process-wide setting {change}, which the reference runs under too"
                for change in torch_settings.changed(self._torch_settings)
            )
        if sys.gettrace() is not None:
            found.append("sys.settrace")
        if sys.getprofile() is not None:
            found.append("sys.setprofile")
        return found

    def check(self, when: str, *, critical_only: bool = False) -> None:
        """Raise TamperingError if anything changed; ``when`` says where we are.

        ``critical_only`` looks at the clocks and the timing and comparison code only
        (cheap enough to run after every timed call).
        """
        if critical_only:
            codes = not self._codes_by_hook
            found = [
                *dict.fromkeys(self._code_swaps),  # any recorded swap: it costs nothing
                *(
                    change
                    for namespace in self._namespaces
                    if namespace.label in CRITICAL
                    or namespace.label.startswith(
                        ("evaluator.timing.", "evaluator.correctness.", "evaluator.counted_time.")
                    )
                    for change in namespace.changes(codes=codes)
                ),
            ]
        else:
            found = self.changes()
        if found:
            shown = ", ".join(found[:8]) + (f" and {len(found) - 8} more" if len(found) > 8 else "")
            raise TamperingError(
                f"tampering: the candidate changed {shown} ({when}); the harness, its "
                "clocks and PyTorch must be left as they are"
            )

    def check_threads(self, when: str) -> None:
        """Raise OutsideWorkError if a thread started by the candidate is still alive."""
        new = _thread_ids() - self._threads
        if new:
            raise OutsideWorkError(
                f"{len(new)} Python thread(s) started by the candidate still running {when}; "
                "all work must be finished when the call returns (work outside the call "
                "escapes the timer and the correctness check)"
            )


DENIED_EVENTS = frozenset({"gc.get_objects", "gc.get_referrers", "gc.get_referents"})
"""Audit events refused in an evaluation process once its harness has started: each hands
out objects the candidate never received (the harness's timing samples, its kept inputs,
the fallback monitor's ledger, the result key), which it could then rewrite or read."""


def deny_object_enumeration() -> None:
    """Refuse ``DENIED_EVENTS`` in this process from now on (an audit hook cannot be
    removed). Installed by the evaluation child after its warm-up, before the candidate
    exists; the harness never enumerates objects itself."""

    def hook(event: str, args: tuple) -> None:
        if event in DENIED_EVENTS:
            raise RuntimeError(
                f"{event}() is not allowed in an evaluation: it reaches the harness's own "
                "objects; a kernel has no use for it"
            )

    sys.addaudithook(hook)


CODE_ATTRIBUTES = frozenset({"__code__", "__defaults__", "__kwdefaults__"})
"""A function's attributes whose assignment changes what it computes (each assignment is
an ``object.__setattr__`` audit event)."""
INSTALLED_EVENT = "atrex.confine_bundle_code.installed"
"""Raised once by ``confine_bundle_code`` to learn that its hook runs (a confining hook
already installed keeps any later one out, without an error)."""
FRAME_EVENTS = frozenset({"sys._getframe", "sys._current_frames", "sys.settrace", "sys.setprofile"})
FRAME_ATTRIBUTES = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
"""Ways for Python code to get a frame object (audit events; the attributes are reported
as ``object.__getattr__``). From any frame, ``f_back`` leads to the harness's frames and
their locals: the timer's samples, the fallback monitor's ledger, the kept inputs."""
CTYPES_EVENTS = frozenset(
    {"ctypes.dlopen", "ctypes.dlsym", "ctypes.dlsym/handle", "ctypes.call_function",
     "ctypes.string_at", "ctypes.wstring_at", "ctypes.cdata", "ctypes.addressof"}
)  # fmt: skip
"""ctypes reaches the interpreter's C API (``PyEval_GetFrame``) and raw memory: refused when
the bundle's own code asks (libraries it calls may still use ctypes)."""
PROCESS_EVENTS = frozenset(
    {"os.fork", "os.forkpty", "os.posix_spawn", "os.spawn", "os.exec", "os.system",
     "os.startfile", "subprocess.Popen"}
)  # fmt: skip
"""Process creation: work in another process is invisible to the profiler's attribution and
to the fallback monitor (a PyTorch worker would pass as the submission's own kernel).
Refused when the bundle's own code asks, past the standard library's frames
(``subprocess``, ``multiprocessing``); libraries it calls (Triton running ptxas, a C
compiler) may still start theirs. Routes that raise no audit event (``multiprocessing``'s
spawn start method) are left to the runner, which watches the child's processes."""
COMPILER_PATHS = tuple(
    os.path.join("torch", name, "") for name in ("_dynamo", "_inductor", "fx", "_functorch")
)
"""Where torch.compile's frame requests come from (their refusal says so)."""
ALLOWED_FRAME_USERS = (os.path.join("triton", "compiler", "compiler.py"),)
"""Library code that reads frames while a candidate's code is running and is let do so:
Triton's compiler trims its own frames from a kernel's compile error."""


def _stdlib_dir() -> str:
    return os.path.join(os.path.realpath(sysconfig.get_paths()["stdlib"]), "")


def confine_bundle_code(
    *,
    harness_dir: str,
    bundle_dir: str,
    frame_users: Iterable[Any] = (),
    guard: IntegrityGuard | None = None,
) -> None:
    """From now on, refuse frame objects to code of the bundle (``bundle_dir``) and to
    anything it calls, except the harness's ``frame_users`` (code objects, by identity) and
    ``ALLOWED_FRAME_USERS``; and ctypes (``CTYPES_EVENTS``) and process creation
    (``PROCESS_EVENTS``) to the bundle's own code.

    Only those code objects of the harness (``harness_dir``) get frames while the bundle is
    on the stack: a submission can rebuild any other function of the harness from its code
    object (``types.FunctionType`` with globals and closure cells of its own) and have the
    frame handed to a callable it chose; these hand on no frame.

    A request is refused (ValueError, which the standard library's own users of frames,
    such as ``collections.namedtuple``, already tolerate) when the requesting code is
    neither harness nor allowed and a frame of the bundle is on the stack; with no
    bundle frame on the stack (the harness between calls) anything goes. Code is the
    harness's, an allowed library's or the standard library's only if it really comes
    from the file it names (``evaluator.code_origin``): code compiled by the bundle under
    such a name is the bundle's, and so is code with no file behind it (``exec`` of a
    string, ``"<string>"``) or a library's name without its code, when it asks for ctypes
    or a process with a bundle frame on the stack. Installed by the evaluation child just
    before it imports the candidate; an audit hook cannot be removed, and its state lives
    in this closure, which no frame or object list reaches.

    With ``guard``, the hook also records every assignment to the code, defaults or keyword
    defaults of a function the guard watches (``IntegrityGuard.record_code_swaps``).
    """
    harness = os.path.join(os.path.realpath(harness_dir), "")
    bundle = os.path.join(os.path.realpath(bundle_dir), "")
    getframe = sys._getframe
    ctypes_dir = os.path.join(os.path.realpath(os.path.dirname(os.__file__)), "ctypes", "")
    stdlib = _stdlib_dir()
    site_packages = os.path.join(os.path.realpath(sysconfig.get_paths()["purelib"]), "")
    # id(code) -> (code, verdict): "harness" (a frame user) | "allowed" | "bundle" |
    # "dynamic" (no file behind it) | "" (a library's file, or the harness's other code). By
    # identity, not equality: code objects compare equal across files.
    verdicts: dict[int, tuple[Any, str]] = {}
    thread_id = _thread.get_ident
    busy: set[int] = set()  # threads inside the hook (its own frame requests pass)
    asker = [""]  # the file of the code whose request was judged last

    users = {id(code): code for code in frame_users}

    def kind(code: Any) -> str:
        held = verdicts.get(id(code))
        if held is not None and held[0] is code:
            return held[1]
        path = os.path.realpath(code.co_filename)
        if users.get(id(code)) is code:
            verdict = "harness"
        elif path.startswith(harness):
            verdict = "" if genuine(code) else "bundle"  # the harness's other code: a library's
        elif path.startswith(bundle):
            verdict = "bundle"
        elif path.endswith(ALLOWED_FRAME_USERS):
            verdict = "allowed" if genuine(code) else "bundle"
        elif not os.path.isfile(path):
            verdict = "dynamic"
        else:
            verdict = ""
        verdicts[id(code)] = (code, verdict)
        return verdict

    def skipped(code: Any, folder: str) -> bool:
        """Genuine code of the standard library (under ``folder``), passed over when
        looking for who asked for ctypes or a process."""
        path = os.path.realpath(code.co_filename)
        return path.startswith(folder) and not path.startswith(site_packages) and genuine(code)

    def bundle_below(frame: Any) -> bool:
        while frame is not None:
            if kind(frame.f_code) == "bundle":
                return True
            frame = frame.f_back
        return False

    def own_request(frame: Any) -> bool:
        """Whether the code in ``frame`` (which asked for ctypes or a process) is the
        bundle's own: its file, a name it cannot back, or no file at all while the bundle
        is on the stack."""
        verdict = kind(frame.f_code)
        if verdict == "bundle":
            return True
        if verdict in ("harness", "allowed"):
            return False
        if verdict == "" and genuine(frame.f_code):
            return False  # a library's own code (Triton running ptxas, say)
        return bundle_below(frame)

    def refused(event: str) -> bool:
        frame = getframe(2)  # the code that asked (0: here, 1: the hook)
        asker[0] = frame.f_code.co_filename
        if event in CTYPES_EVENTS or event in PROCESS_EVENTS:
            # Past ctypes' own Python code (``pythonapi.X`` looks X up from there), or the
            # standard library's (``subprocess``, ``multiprocessing``) for a process.
            folder = ctypes_dir if event in CTYPES_EVENTS else stdlib
            while frame is not None and skipped(frame.f_code, folder):
                frame = frame.f_back
            return frame is not None and own_request(frame)
        first = kind(frame.f_code)
        if first in ("harness", "allowed"):
            return False
        if first == "bundle":
            return True
        while frame is not None:  # a library asked: refuse if the bundle is below it
            if kind(frame.f_code) == "bundle":
                return True
            if any(part in frame.f_code.co_filename for part in COMPILER_PATHS):
                asker[0] = frame.f_code.co_filename  # torch.compile's machinery asked
            frame = frame.f_back
        return False

    watched_functions: dict[int, tuple[Any, str]] = {}
    code_swaps: list[list[str]] = []  # the guard's record, once the hook is known to run
    installed: list[bool] = []

    def hook(event: str, args: tuple) -> None:
        if event == "sys.addaudithook":
            # A later hook would be handed the frames this one lets the harness have (a
            # RuntimeError here keeps it out, silently: CPython's rule for this event).
            raise RuntimeError("no more audit hooks in an evaluation")
        if event == "object.__setattr__":
            if code_swaps and len(args) >= 2 and args[1] in CODE_ATTRIBUTES:
                held = watched_functions.get(id(args[0]))
                if held is not None and held[0] is args[0]:
                    code_swaps[0].append(f"{held[1]}.{args[1]}")
            return
        if event == INSTALLED_EVENT:
            installed.append(True)
            return
        if event == "object.__getattr__":
            if len(args) < 2 or args[1] not in FRAME_ATTRIBUTES:
                return
        elif event not in FRAME_EVENTS and event not in CTYPES_EVENTS | PROCESS_EVENTS:
            return
        me = thread_id()
        if me in busy:  # the hook's own request for the asker's frame
            return
        busy.add(me)  # per thread: another thread's request is judged on its own
        try:
            deny = refused(event)
        finally:
            busy.discard(me)
        if deny:
            if any(part in asker[0] for part in COMPILER_PATHS):
                raise ValueError(
                    f"{event}: torch.compile cannot run in an evaluation: it is PyTorch "
                    "generating code, not a kernel of the submission's own (a fallback), and it "
                    "needs frame objects, which a submission's code is not given; write the "
                    "kernel in Triton"
                )
            if event in PROCESS_EVENTS:
                raise PermissionError(
                    f"{event}: a submission's code may not start processes in an evaluation "
                    "(work in another process escapes the profiler's attribution and the "
                    "fallback check); compute in the evaluation process, in your own kernels"
                )
            what = (
                "ctypes is not available to a submission's code"
                if event in CTYPES_EVENTS
                else "frame objects are not given to a submission's code"
            )
            raise ValueError(
                f"{event}: {what} in an evaluation (through them the harness's own frames "
                "and memory can be reached)"
            )

    sys.addaudithook(hook)
    sys.audit(INSTALLED_EVENT)  # a hook already here may have kept this one out, silently
    if guard is not None and installed:
        functions, swaps = guard.record_code_swaps()
        watched_functions.update(functions)
        code_swaps.append(swaps)


def bound_checker(
    guard: IntegrityGuard | None, when: str, *, critical_only: bool = False
) -> Callable[[], None]:
    """A zero-argument check (threads, then tampering) for call-by-call hooks."""
    if guard is None:
        return lambda: None

    def check() -> None:
        guard.check_threads(when)
        guard.check(when, critical_only=critical_only)

    return check
