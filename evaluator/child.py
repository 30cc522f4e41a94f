"""The per-operator child process: import the candidate, then check and time each shape.

Started by the runner as ``python -m evaluator.child --job-fd R --result-fd W --device D``.
It first starts the harness (torch, the evaluator's modules, the device, the profiler:
nothing of the candidate's), then waits for the job (operator, bundle file, shapes, seed,
budget, a per-run key), one frame on the job pipe: so the runner can start the next
operator's child while this one is still measuring, and hand it the job at its turn.
Per-shape records go back as frames on the result pipe, as they complete. A frame is a
4-byte big-endian length and that many bytes: on the result pipe,
the hex HMAC-SHA256 of the JSON under the run's key, then the UTF-8 JSON. The child's
stdout and stderr are the candidate's log; nothing is ever parsed from them.

The candidate runs in this process, after the harness has bound everything it measures
with and taken an integrity snapshot (``evaluator.integrity``); the key is taken out of
the job before the candidate is imported. A candidate that writes frames of its own to
any descriptor cannot sign them, and the runner fails the operator for it. The frame
protocol is ``evaluator.frames``; the measurement of a shape, ``evaluator.measure``. What one
process cannot do against code running inside it (read the key out of memory, patch the
interpreter natively) is the sandbox's job; what Python itself offers to reach the harness
(frames, the garbage collector's object lists, ctypes) is refused by an audit hook
(``evaluator.integrity.confine_bundle_code``, ``deny_object_enumeration``).

Module-level imports are light (no torch): torch and the harness's heavy modules are
loaded by ``warm_up``, timed, before the job is read.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import os
import secrets
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from evaluator.concurrency import TimingGate
from evaluator.frames import WARM_UP_FAILED, read_exactly, read_job, write_frame
from evaluator.measure import (
    evaluate_shape,
    message_of,
    operator_spec,
    rehearse_checks,
    sanitized_call,
    traceback_tail,
)
from evaluator.sanitizer import GO_TOKEN_BYTES


def import_candidate(path: Path, slug: str, bundle_dir: Path) -> Any:
    """Import the candidate file under a unique module name, the bundle on sys.path."""
    sys.path.insert(0, str(bundle_dir))
    if path.parent != bundle_dir:
        sys.path.insert(0, str(path.parent))
    name = f"atrex_candidate_{slug}_{secrets.token_hex(4)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path.name}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    if not hasattr(module, "Model"):
        raise ImportError(f"{path.name} defines no 'Model'")
    return module


# --------------------------------------------------------------------------- the process


class _Channel:
    """The signed result pipe: holds the fd and the key, which nothing else keeps."""

    __slots__ = ("_fd", "_key")

    def __init__(self, fd: int, key: bytes | None) -> None:
        self._fd = fd
        self._key = key

    def send(self, message: Mapping[str, Any]) -> None:
        """Write one signed frame."""
        write_frame(self._fd, message, key=self._key)


def harness_imports() -> None:
    """Import torch and every harness module the measurement uses (every built-in operator
    among them), none of them the candidate's and none touching a device: the first step
    of ``warm_up`` in every child, and what the fork server (``evaluator.forkserver``)
    imports once for all the children it forks, so that one list serves both."""
    import torch  # noqa: F401

    import evaluator.baselines  # the eager figure's code, watched like the references
    import evaluator.correctness
    import evaluator.fallback
    import evaluator.integrity
    import evaluator.operators
    import evaluator.operators._variants
    import evaluator.reference_pool
    import evaluator.static_scan
    import evaluator.timing
    import evaluator.torch_settings  # the integrity guard's first read
    import evaluator.variants

    del evaluator  # only imported so that they are loaded before the snapshot


def warm_up(device: str, steps: list[tuple[str, float]], *, sanitize: bool = False) -> None:
    """Start everything the measurement uses, none of it the candidate's: import torch and
    the harness's modules (every built-in operator among them), set up the allocator and
    the device, start the profiler. Each step's end goes into ``steps`` (name,
    ``time.perf_counter()``). Runs before the job arrives.

    A sanitized child (``sanitize``: started under ``compute-sanitizer``, often while the
    last operator's child is still timing) starts no profiler, which its call does not use,
    and launches no kernel: on CUDA it only makes its context (under the tool, seconds),
    so that its job begins with the device ready."""
    harness_imports()
    import torch

    import evaluator.fallback as evaluator_fallback

    steps.append(("imports", time.perf_counter()))
    torch.empty(1)  # the allocator and dispatcher set up before the snapshot
    if torch.device(device).type == "cuda":
        torch.cuda.device_count()  # fills torch.cuda's lazy caches before the snapshot
        if sanitize:
            torch.cuda.synchronize(device)  # the context, without launching a kernel
    steps.append(("device", time.perf_counter()))
    if torch.device(device).type == "cuda" and warm_triton_key():
        steps.append(("triton key", time.perf_counter()))
    if sanitize:
        return
    evaluator_fallback.prepare_monitoring(torch.device(device))
    steps.append(("profiler", time.perf_counter()))


def warm_triton_key() -> bool:
    """Compute Triton's hash of its own install (every compiler, backend and language
    file, and the 0.5 GB libtriton: 0.5-1 s), which its first compile would otherwise pay
    inside the measured round; cached by Triton for the process. False where this Triton
    has no such function (or no Triton): its first compile pays it as before."""
    for module_name in ("triton.runtime.cache", "triton.compiler.compiler"):
        try:
            key = getattr(importlib.import_module(module_name), "triton_key", None)
        except ImportError:
            continue
        if callable(key):
            try:
                key()
            except OSError:  # an unreadable install: the first compile will say so
                return False
            return True
    return False


def confine_candidate(bundle_dir: Path, guard: Any | None) -> None:
    """From here on the bundle's code gets no frame objects (they lead to the harness's), no
    ctypes and no processes of its own, and the code swaps of the functions ``guard``
    watches are recorded as they happen (``evaluator.integrity.confine_bundle_code``).
    Called before the candidate exists."""
    from evaluator.fallback_cpu import FRAME_USER_CODES
    from evaluator.integrity import confine_bundle_code

    confine_bundle_code(
        harness_dir=str(Path(__file__).parent),
        bundle_dir=str(bundle_dir),
        frame_users=FRAME_USER_CODES,
        guard=guard,
    )


def _integrity_guard(spec: Any) -> Any:
    """Snapshot everything the measurement uses (``warm_up`` loaded it), before the
    candidate exists; an uploaded operator's reference class is watched too."""
    from evaluator.integrity import IntegrityGuard

    extra = []
    model_class = getattr(spec, "model_class", None)
    if isinstance(model_class, type) and not model_class.__module__.startswith("evaluator."):
        extra.append((f"reference {model_class.__qualname__}", model_class.__dict__))
    interpreter = sys.modules.get("triton.runtime.interpreter")
    if interpreter is not None:
        # The CPU fallback monitor times launches of the bundle's kernels through these
        # (evaluator.fallback_cpu.bind_interpreter): work hidden in a replaced launch would
        # count as the bundle's own.
        for name in ("InterpretedFunction", "GridExecutor"):
            cls = getattr(interpreter, name, None)
            if isinstance(cls, type):
                extra.append((f"triton.runtime.interpreter.{name}", cls.__dict__))
    return IntegrityGuard(extra=extra)


def run_job(
    job: dict[str, Any],
    result_fd: int,
    steps: list[tuple[str, float]] | None = None,
    go_fd: int | None = None,
    reference_fd: int | None = None,
) -> int:
    """Evaluate every shape of the job, streaming one record per shape; 0 when finished.

    ``steps`` are the warm-up's (see ``warm_up``), for the log line that says where the
    start-up went; the job may arrive long after them. A ``sanitize`` job goes to
    ``run_sanitize_job``, with ``go_fd`` (the job pipe, kept open).

    With ``validation_variants`` in the job, the operator's hidden variants are checked
    first (one ``variant`` record each, see ``evaluator.variants``); if one fails, every
    shape is reported ``incorrect`` with its error, unmeasured.

    With ``reference_pool`` in the job, shapes that carry a trial plan take their pooled
    reference outputs from the runner on ``reference_fd`` (``evaluator.reference_pool``).
    """
    key_hex = job.pop("auth_key", None)
    channel = _Channel(result_fd, bytes.fromhex(key_hex) if key_hex else None)
    del key_hex
    send = channel.send
    pool = None
    if job.get("reference_pool") and reference_fd is not None:
        from evaluator.reference_pool import PoolClient

        pool = PoolClient(reference_fd, send)  # bound before the candidate exists
    send({"event": "hello", "pid": os.getpid()})
    if job.get("sanitize"):
        return run_sanitize_job(job, send, go_fd)
    gate = None
    if job.get("timing_window") and go_fd is not None:
        # Other operators' children run beside this one: the timing is exclusive.
        gate = TimingGate(go_fd, send, _device_sync(job["device"]), _device_release(job["device"]))
        gate.begin()
    steps = [*(steps or []), ("job", time.perf_counter())]
    try:
        spec = operator_spec(job)
    except Exception as exc:  # an operator this evaluator does not implement: ours to fix
        send({"event": "harness_error", "error": message_of(exc)})
        return 0
    # Bound before the candidate exists: it cannot swap the functions this loop calls.
    from evaluator.static_scan import scan_candidate  # stdlib only; before the snapshot

    steps.append(("operator", time.perf_counter()))
    from evaluator.fallback_cuda import ModuleScanMemo

    # The fallback reports' module scan, shared by this operator's shapes: made before the
    # candidate exists and held by this loop only (ModuleScanMemo).
    scans = ModuleScanMemo()
    guard = _integrity_guard(spec)
    steps.append(("snapshot", time.perf_counter()))
    send({"event": "ready"})  # the operator's reference is loaded, the snapshot taken
    # For the operator's log: where the start-up went ("job": waiting for its turn).
    durations = ", ".join(
        f"{b[0]} {b[1] - a[1]:.2f}" for a, b in zip(steps, steps[1:], strict=False)
    )
    print(f"[harness] start-up steps (s): {durations}", file=sys.stderr, flush=True)
    evaluate = evaluate_shape
    from evaluator.variants import (
        check_variant,
        failed_variant_codes,
        failed_variant_error,
        variants_of,
    )

    variants = variants_of(job)  # taken before the candidate exists
    bundle_dir = Path(job["bundle_dir"])
    recorder = None
    if job.get("record_compiles"):  # a campaign's round: its next round compiles these ahead
        from evaluator.compile_ahead import Recorder

        recorder = Recorder()
        if not recorder.install():
            recorder = None
    confine_candidate(bundle_dir, guard)
    try:
        module = import_candidate(bundle_dir / job["module_path"], job["operator"], bundle_dir)
    except BaseException as exc:  # the candidate's import failed, whatever it raised
        send({"event": "compile_error", "error": message_of(exc), "traceback": traceback_tail(exc)})
        return 0
    send({"event": "imported"})
    from evaluator.integrity import TamperingError

    try:
        guard.check("while the candidate was imported")
    except TamperingError as exc:
        send({"event": "tampering", "error": exc.message})
        return 0
    if job.get("compile_ahead"):
        rehearsal: dict[str, Any] = {}
        ahead = _compile_ahead(
            module, bundle_dir, job["compile_ahead"], recorder,
            meanwhile=functools.partial(_rehearse, job, scans, rehearsal),
        )  # fmt: skip
        send({"event": "compiled_ahead", **ahead, **rehearsal})
        try:
            guard.check("while the kernel's specialisations were compiled ahead")
        except TamperingError as exc:
            send({"event": "tampering", "error": exc.message})
            return 0
    scan_warnings = scan_candidate(module, bundle_dir)  # hints, once per operator
    variant_records = []
    for variant in variants:
        if gate is not None:
            gate.checkpoint()
        send({"event": "variant_start", "name": variant.name})
        try:
            variant_record = check_variant(
                spec=spec,
                variant=variant,
                model_class=module.Model,
                device=job["device"],
                run_seed=job["seed"],
                guard=guard,
            )
            guard.check(f"during validation variant {variant.name!r}")
        except TamperingError as exc:
            send({"event": "tampering", "error": exc.message})
            return 0
        variant_records.append(variant_record)
        send({"event": "variant", "result": variant_record})
    variant_error = failed_variant_error(variant_records)
    variant_codes = failed_variant_codes(variant_records)
    for shape in job["shapes"]:
        if gate is not None:
            gate.checkpoint()
        send({"event": "shape_start", "shape_id": shape["shape_id"]})
        if variant_error is not None:
            # A wrong answer at a variant makes every shape's answer untrustworthy.
            record = {
                "shape_id": shape["shape_id"],
                "status": "incorrect",
                "error": variant_error,
                "codes": variant_codes,
                "warnings": list(scan_warnings),
            }
            send({"event": "shape", "result": record})
            continue
        record = evaluate(
            job=job, shape=shape, model_class=module.Model, guard=guard, pool=pool, gate=gate,
            scans=scans,
        )  # fmt: skip
        record["warnings"] = [*scan_warnings, *record.get("warnings", [])]
        if not record.get("tampering"):
            try:
                guard.check(f"during shape {shape['shape_id']}")
            except TamperingError as exc:
                record = {
                    "shape_id": shape["shape_id"],
                    "status": "runtime_error",
                    "error": exc.message,
                    "tampering": True,
                    "codes": ["tampering"],
                    "warnings": [],
                }
        send({"event": "shape", "result": record})
        if record.get("tampering"):
            send({"event": "tampering", "error": record["error"]})
            return 0
    if recorder is not None:
        send({"event": "compiles", "specs": recorder.specs()})
    send({"event": "done"})
    return 0


def _rehearse(job: Mapping[str, Any], scans: Any, into: dict[str, Any]) -> None:
    """``evaluator.measure.rehearse_checks`` while the kernel's specialisations compile:
    its seconds, or why it stopped, into ``into`` (``rehearsal_s``, ``rehearsal_error``);
    it never raises, and decides nothing."""
    try:
        into["rehearsal_s"] = rehearse_checks(job, scans=scans)
    except Exception as exc:
        into["rehearsal_error"] = message_of(exc)


def _compile_ahead(
    module: Any,
    bundle_dir: Path,
    specs: Any,
    recorder: Any | None,
    *,
    meanwhile: Callable[[], Any] | None = None,
) -> dict[str, Any]:
    """The previous round's specialisations compiled for the candidate's functions (its
    module's and those of the bundle's other modules it loaded), before its first shape
    (``evaluator.compile_ahead``), ``meanwhile`` run while they compile."""
    from evaluator.compile_ahead import compile_ahead

    root = os.path.join(os.path.realpath(bundle_dir), "")
    modules = [module]  # itself first: its names win
    try:
        for other in list(sys.modules.values()):
            path = getattr(other, "__file__", None)
            if isinstance(path, str) and os.path.realpath(path).startswith(root):
                modules.append(other)
        return compile_ahead(modules, specs, recorder=recorder, meanwhile=meanwhile)
    except Exception as exc:  # never the round's verdict: its shapes compile as before
        return {"error": message_of(exc)}


def _device_sync(device: str) -> Any:
    """What waits for the device's work (nothing to wait for on the CPU)."""
    import torch

    if torch.device(device).type != "cuda":
        return lambda: None
    synchronize, target = torch.cuda.synchronize, torch.device(device)
    return lambda: synchronize(target)


def _device_release(device: str) -> Any:
    """What hands the device memory PyTorch keeps cached (allocated once, freed since) back
    to the device, for the other children alive at once (nothing to do on the CPU)."""
    import torch

    if torch.device(device).type != "cuda":
        return lambda: None
    return torch.cuda.empty_cache


def run_sanitize_job(job: dict[str, Any], send: Any, go_fd: int | None) -> int:
    """The operators of a ``sanitize`` job, one after another, each called once at its
    smallest shape under ``compute-sanitizer`` (``evaluator.measure.sanitized_call``).

    Each operator is framed by ``operator_start`` and ``operator_done`` (signed, like every
    record), between which its candidate is imported and called; before ``operator_done``
    the device is synchronised. Then the harness waits for the runner's go-ahead on
    ``go_fd``: a fresh token of ``GO_TOKEN_BYTES``, sent once the sanitizer's log has been
    quiet a while, which the next ``operator_start`` carries back, so the runner knows the
    next operator's code started only after the window was closed
    (``evaluator.sanitizer``). A call that failed (a hardware exception leaves the CUDA
    context unusable) or tampered ends the child after its record, without
    ``operator_done``: the runner goes on from the next operator in a new child.
    """
    import torch

    from evaluator.integrity import IntegrityGuard

    guard = IntegrityGuard()
    send({"event": "ready"})
    bundle_dir = Path(job["bundle_dir"])
    confine_candidate(bundle_dir, guard)
    device = torch.device(job["device"])
    go = b""
    for entry in job["operators"]:
        operator = str(entry["operator"])
        sub_job = {**job, **entry}
        send({"event": "operator_start", "operator": operator, "go": go.decode("ascii", "replace")})
        record: dict[str, Any]
        try:
            module = import_candidate(bundle_dir / entry["module_path"], operator, bundle_dir)
        except BaseException as exc:  # the candidate's import failed, whatever it raised
            record = {"shape_id": entry["shape"]["shape_id"], "status": "compile_error",
                      "error": message_of(exc), "codes": ["compile_error"]}  # fmt: skip
        else:
            record = sanitized_call(
                job=sub_job, shape=entry["shape"], model_class=module.Model, guard=guard
            )
        send({"event": "shape", "operator": operator, "result": record})
        if record.get("tampering") or record["status"] == "runtime_error":
            return 0  # the runner starts a new child for the operators after this one
        try:
            if device.type == "cuda":
                torch.cuda.synchronize(device)
        except BaseException:  # the context is unusable: a new child goes on
            return 0
        send({"event": "operator_done", "operator": operator})
        if go_fd is not None and entry is not job["operators"][-1]:
            go = read_exactly(go_fd, GO_TOKEN_BYTES)
    send({"event": "done"})
    return 0


def _not_dumpable() -> None:
    """Keep other processes of the sandbox user (another worker's child) from attaching
    to this one or reading its memory (/proc/<pid>/mem): the job holds the key and seed."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(
            ctypes.c_int(4),
            ctypes.c_ulong(0),
            ctypes.c_ulong(0),
            ctypes.c_ulong(0),
            ctypes.c_ulong(0),
        )  # PR_SET_DUMPABLE 0
    except (OSError, AttributeError):  # not Linux: nothing to do
        pass


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m evaluator.child``."""
    parser = argparse.ArgumentParser(prog="evaluator.child")
    parser.add_argument("--job-fd", type=int, required=True)
    parser.add_argument("--result-fd", type=int, required=True)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--reference-fd", type=int, default=None)
    parser.add_argument(
        "--sanitize", action="store_true", help="a sanitized child: its job is a sanitize job"
    )
    args = parser.parse_args(argv)
    _not_dumpable()
    steps = [("start", time.perf_counter())]
    try:
        warm_up(args.device, steps, sanitize=args.sanitize)
    except BaseException:  # the harness could not start: say why in the log, exit 3
        traceback.print_exc()
        print("[harness] the evaluation harness could not start", file=sys.stderr, flush=True)
        return WARM_UP_FAILED
    from evaluator.integrity import deny_object_enumeration

    deny_object_enumeration()  # before any candidate code: no gc.get_objects() and kin
    job = read_job(args.job_fd)
    if bool(job.get("sanitize")) != args.sanitize:
        # A sanitized child has no profiler for a measurement; a regular one is not under
        # the tool: the runner's mistake, no candidate code has run.
        print("[harness] the job does not fit this child (sanitize)", file=sys.stderr, flush=True)
        return WARM_UP_FAILED
    # A sanitized child's go-aheads, or a concurrent child's pauses and timing window
    # (evaluator.concurrency), come on the job pipe.
    go_fd = args.job_fd if job.get("sanitize") or job.get("timing_window") else None
    if go_fd is None:
        os.close(args.job_fd)
    # Keep the result pipe off the candidate's obvious path: a copy at a high number,
    # close-on-exec, the original closed (the candidate runs in this process, so this
    # is hygiene, not a security boundary; sandboxing is the worker's job).
    result_fd = os.dup(args.result_fd)
    os.close(args.result_fd)
    os.set_inheritable(result_fd, False)
    reference_fd = None
    if args.reference_fd is not None:
        # The pooled reference outputs arrive here, each only after the call it checks.
        reference_fd = os.dup(args.reference_fd)
        os.close(args.reference_fd)
        os.set_inheritable(reference_fd, False)
    return run_job(job, result_fd, steps, go_fd=go_fd, reference_fd=reference_fd)


if __name__ == "__main__":
    code = main()
    # Leave without running atexit handlers or waiting for threads the candidate left.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
