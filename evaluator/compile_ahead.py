"""Compile a revised kernel's Triton specialisations before its shapes, several at once.

An agent's round whose kernel changed compiles every specialisation again, one after the
other, each at the first call of the shape that needs it (0.2 s each for rms_norm's on the
H200; 12 of them over its 56 public shapes). A campaign's rounds run the same shapes round
after round, and so mostly need the same specialisations: the child of a round writes down
what Triton compiled (``Recorder``, on Triton's ``jit_post_compile_hook``, with Triton's
own serialised specialisation), and the next round's child, after importing the revised
kernel and before its first shape, compiles those of its functions that still exist with
the same parameters (``compile_ahead``).

Several at once: Triton's compiler holds the interpreter's lock for most of a compile, so
threads gain little (12 specialisations: 2.6 s on one thread, 1.6 s on eight). They are
compiled in forked copies of the child instead (``fork_compilers``), one a specialisation up
to the cores, each writing what it compiled (the kernels, and the launchers their first
launches would build) into the round's own Triton cache and dying
after ``FORK_LIMIT_S`` at the latest, which keeps it inside the runner's allowance for a
fork of the child (``evaluator.sandbox.FORK_GRACE_S``; its memory watch counts such a
fork's private memory only, ``tree_rss_bytes``). Then the child itself loads every
one (``JITFunction.preload``): from that cache, or, for one a fork did not finish,
compiling it there.

What runs is unchanged: a specialisation is compiled from the round's own source, under
the key Triton's launch computes from the call's arguments; a launch whose key was not
compiled ahead compiles as before. A record that no longer fits (a renamed function,
other parameters, a Triton error) is skipped or counted as failed, never raised. The
record comes from the campaign's own earlier round: candidate code could forge it, but
only to steer what its own next round compiles, which that round's code can do itself. A
specialisation compiled ahead and never launched is not recorded again (``Recorder.specs``),
so a campaign's list follows its kernel.

Triton is imported inside the functions only: the web never imports this module's
dependencies, and a process without Triton (or with the interpreter) records and compiles
nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

MAX_SPECS = 256
"""At most this many specialisations are recorded, or compiled ahead, for a round."""
MAX_SPEC_BYTES = 16 * 1024
"""A longer serialised specialisation is not kept (a real one is 1-2 kB): a round's whole
record stays under 4 MiB, well inside a frame (``evaluator.frames.MAX_FRAME_BYTES``)."""
MAX_NAME_CHARS = 256
FORK_LIMIT_S = 1.5
"""A compiling fork is killed (SIGALRM, default action) this long after it was made: the
runner takes a copy of the child older than ``evaluator.sandbox.FORK_GRACE_S`` for a
process of the submission's own."""

_fork = os.fork  # bound here: candidate code may rebind the module attribute later
_exit = os._exit
_waitpid = os.waitpid
_setitimer = signal.setitimer
_signal = signal.signal


def default_workers() -> int:
    """Compiles at once: the process's cores, at most 16."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(16, cores))


def _knobs() -> Any | None:
    try:
        from triton import knobs
    except Exception:  # no Triton, or one without knobs: nothing to record
        return None
    return knobs if hasattr(getattr(knobs, "runtime", None), "jit_post_compile_hook") else None


def valid_specs(specs: Any) -> list[dict[str, str]]:
    """The well-formed records of ``specs`` (untrusted: they come from a child), at most
    ``MAX_SPECS``: ``{"function": qualified name, "data": Triton's serialised
    specialisation}`` with strings of bounded size."""
    kept: list[dict[str, str]] = []
    if not isinstance(specs, list):
        return kept
    for spec in specs:
        if len(kept) >= MAX_SPECS:
            break
        if not isinstance(spec, dict):
            continue
        name, data = spec.get("function"), spec.get("data")
        if (
            isinstance(name, str)
            and isinstance(data, str)
            and 0 < len(name) <= MAX_NAME_CHARS
            and 0 < len(data) <= MAX_SPEC_BYTES
        ):
            kept.append({"function": name, "data": data})
    return kept


class Recorder:
    """What Triton compiles in this process, as ``{"function", "data"}`` records: the JIT
    function's qualified name and Triton's serialised specialisation of it."""

    def __init__(self) -> None:
        self._specs: list[dict[str, str]] = []
        self._seen: set[tuple[str, str]] = set()
        self._ahead: list[tuple[dict[str, str], Any]] = []
        self._paused = False
        self._lock = threading.Lock()

    def install(self) -> bool:
        """Chain onto Triton's post-compile hook; False where this Triton has none."""
        knobs = _knobs()
        if knobs is None:
            return False
        previous = knobs.runtime.jit_post_compile_hook

        def hook(**kwargs: Any) -> Any:
            self._note(kwargs.get("fn"), kwargs.get("compile"))
            return previous(**kwargs) if previous is not None else None

        knobs.runtime.jit_post_compile_hook = hook
        return True

    @contextlib.contextmanager
    def paused(self):  # type: ignore[no-untyped-def]
        """Compiles inside are not recorded as launched (``compile_ahead`` reports its own
        through ``ahead``)."""
        self._paused = True
        try:
            yield
        finally:
            self._paused = False

    def _note(self, fn: Any, compile: Any) -> None:
        if self._paused:
            return
        data = compile.get("specialization_data") if isinstance(compile, dict) else None
        name = getattr(fn, "name", None)
        spec = valid_specs([{"function": name, "data": data}])
        if spec:
            self._add(spec[0])

    def _add(self, spec: dict[str, str]) -> None:
        with self._lock:
            key = (spec["function"], spec["data"])
            if len(self._specs) < MAX_SPECS and key not in self._seen:
                self._seen.add(key)
                self._specs.append(spec)

    def ahead(self, spec: dict[str, str], kernel: Any) -> None:
        """A specialisation compiled ahead, as ``kernel``: recorded again only if it was
        launched (``specs``)."""
        with self._lock:
            self._ahead.append((spec, kernel))

    def specs(self) -> list[dict[str, str]]:
        """What the next round should compile ahead: the specialisations compiled at a
        launch, then those compiled ahead and launched since (or of which that cannot be
        told)."""
        with self._lock:
            ahead = list(self._ahead)
        for spec, kernel in ahead:
            if launched(kernel) is not False:
                self._add(spec)
        with self._lock:
            return list(self._specs)


def launched(kernel: Any) -> bool | None:
    """Whether Triton has loaded ``kernel`` onto the device (it does so at the first
    launch): None where this Triton's compiled kernel does not say."""
    if kernel is None or not hasattr(kernel, "__dict__"):
        return None
    state = vars(kernel)
    if "function" not in state:
        return None
    return state["function"] is not None


def jit_functions(modules: Iterable[Any]) -> dict[str, Any]:
    """The Triton JIT functions the modules hold at their top level, by qualified name (an
    autotuned or heuristic kernel by the function it wraps)."""
    try:
        from triton.runtime.jit import JITFunction
    except Exception:
        return {}
    try:
        from triton.runtime.jit import KernelInterface
    except Exception:  # no wrappers to look into
        KernelInterface = JITFunction  # noqa: N806
    found: dict[str, Any] = {}
    for module in modules:
        for value in list(getattr(module, "__dict__", {}).values()):
            for _ in range(4):  # Autotuner(Heuristics(JITFunction)): a few layers
                if isinstance(value, JITFunction):
                    found.setdefault(value.fn.__qualname__, value)
                    break
                if not isinstance(value, KernelInterface):
                    break
                value = vars(value).get("fn")
    return found


def fitted(function: Any, data: str) -> str | None:
    """The record made to name ``function``, or None where it does not fit it: its
    parameters, in order, must be the function's own."""
    try:
        record = json.loads(data)
    except ValueError:
        return None
    if not isinstance(record, dict) or not isinstance(record.get("signature"), dict):
        return None
    if list(record["signature"]) != list(function.arg_names):
        return None
    record["name"] = function._fn_name
    return json.dumps(record)


Work = tuple[Any, str, dict[str, str]]
"""A specialisation to compile: (JIT function, its record fitted to it, the record)."""


def launcher_builders(work: Sequence[Work]) -> frozenset[str]:
    """The records (their fitted data) whose fork also builds the kernel's launcher: the
    first of each function, parameter types and constant names. Triton's launcher is made
    from the kernel's signature without its constants' values, so the others would only
    build the same one again; a launcher two keys share is built twice, one missed is built
    at the first launch as before."""
    builders: dict[str, str] = {}
    for function, data, _ in work:
        try:
            record = json.loads(data)
            key = json.dumps(
                [function._fn_name, record.get("signature"), sorted(record.get("constants") or {})],
                sort_keys=True,
            )
        except (TypeError, ValueError, AttributeError):
            continue
        builders.setdefault(key, data)
    return frozenset(builders.values())


def fork_compilers(
    work: Sequence[Work], *, device: int, forks: int, launchers: frozenset[str] = frozenset()
) -> list[tuple[int | None, list[Work]]]:
    """Split ``work`` into up to ``forks`` groups and fork a copy
    of this process to compile each into Triton's disk cache, with the launchers of the
    records in ``launchers`` (``launcher_builders``); each fork dies after ``FORK_LIMIT_S``
    whatever it was doing. Returns (pid, group) pairs, the pid None for a group no fork
    took (the caller compiles it itself)."""
    from triton.runtime import driver

    groups = [list(work[index::forks]) for index in range(min(forks, len(work)))]
    made: list[tuple[int | None, list[Work]]] = []
    for group in groups:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # "multi-threaded fork"
            try:
                pid = _fork()
            except OSError:
                made.append((None, group))
                continue
        if pid == 0:  # the fork: compile, and never return into the child's code
            try:
                _signal(signal.SIGALRM, signal.SIG_DFL)
                _setitimer(signal.ITIMER_REAL, FORK_LIMIT_S)
                # The device's runtime cannot be used in a fork; the compiler needs only
                # the device's number, which the parent knows.
                driver.active.get_current_device = lambda: device
                for function, data, _ in group:
                    with contextlib.suppress(Exception):
                        kernel = function.preload(data)
                        if data in launchers:
                            # Its launcher too, as the kernel's first launch would make it:
                            # in Triton 3.6 a C stub per signature, compiled with the host's
                            # C compiler into the same cache (0.2-0.33 s each at a round's
                            # first calls on the H200; results/2026-12-04-h200-session21).
                            driver.active.launcher_cls(kernel.src, kernel.metadata)
            finally:
                _exit(0)
        made.append((pid, group))
    return made


def _reap(pid: int | None) -> None:
    if pid is not None:
        with contextlib.suppress(ChildProcessError, InterruptedError):
            _waitpid(pid, 0)


def compile_ahead(
    modules: Sequence[Any],
    specs: Any,
    *,
    recorder: Recorder | None = None,
    workers: int | None = None,
    forks: bool = True,
    meanwhile: Callable[[], Any] | None = None,
) -> dict[str, Any]:
    """Compile the recorded specialisations of the modules' JIT functions before the first
    shape (see the module docstring), and wait for them: each fork's group is loaded as soon
    as that fork is gone, beside the others still compiling. Returns ``{"compiled", "skipped",
    "failed", "forks", "fork_s" (making them), "seconds"}``; never raises for a record
    that does not fit or does not compile. ``meanwhile`` runs in this thread while the
    compiles go on (once the forks are made), or on its own where there is nothing to
    compile; what it raises is raised here, after the compiles."""
    started = time.perf_counter()
    functions = jit_functions(modules)
    work: list[Work] = []
    skipped = 0
    seen: set[str] = set()
    for spec in valid_specs(specs):
        function = functions.get(spec["function"])
        data = fitted(function, spec["data"]) if function is not None else None
        if data is None or data in seen:
            skipped += 1
            continue
        seen.add(data)
        work.append((function, data, spec))
    failed = made = 0
    fork_s = 0.0
    if work:
        from triton.runtime import driver

        device = driver.active.get_current_device()
        for function, _, _ in work:  # built here, once: not raced for by the threads
            _ = function.device_caches[device], function.cache_key
        count = max(1, min(workers or default_workers(), len(work)))
        if forks and count > 1:
            forking = time.perf_counter()
            groups = fork_compilers(
                work, device=device, forks=count, launchers=launcher_builders(work)
            )
            fork_s = time.perf_counter() - forking
        else:
            groups = [(None, work[index::count]) for index in range(count)]
        made = sum(pid is not None for pid, _ in groups)
        errors: list[BaseException] = []

        def load(pid: int | None, group: list[Work]) -> None:
            """Once its fork is gone: each of the group from the cache the fork filled, or
            compiled here where the fork did not get to it."""
            _reap(pid)
            for function, data, spec in group:
                try:
                    kernel = function.preload(data)
                except Exception as exc:  # a record the revised kernel no longer compiles
                    errors.append(exc)
                    continue
                if recorder is not None:
                    recorder.ahead(spec, kernel)

        with recorder.paused() if recorder is not None else contextlib.nullcontext():
            with ThreadPoolExecutor(
                max_workers=len(groups), thread_name_prefix="compile-ahead"
            ) as pool:
                futures = [pool.submit(load, pid, group) for pid, group in groups]
                try:
                    if meanwhile is not None:
                        meanwhile()
                finally:
                    for future in futures:
                        future.result()
        failed = len(errors)
    elif meanwhile is not None:
        meanwhile()
    return {
        "compiled": len(work) - failed,
        "skipped": skipped,
        "failed": failed,
        "forks": made,
        "fork_s": round(fork_s, 4),
        "seconds": round(time.perf_counter() - started, 4),
    }
