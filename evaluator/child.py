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
any descriptor cannot sign them, and the runner fails the operator for it. What one
process cannot do against code running inside it (read the key out of memory, patch the
interpreter natively) is the sandbox's job; what Python itself offers to reach the harness
(frames, the garbage collector's object lists, ctypes) is refused by an audit hook
(``evaluator.integrity.confine_bundle_code``, ``deny_object_enumeration``).

Module-level imports are stdlib only: the runner imports the framing helpers from here
without loading torch.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import importlib.util
import json
import os
import secrets
import sys
import time
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# Light (no torch) and bound at import, before any candidate code runs in this process.
from evaluator.results import under_own_share_threshold

MAX_FRAME_BYTES = 16 * 1024 * 1024
TRACEBACK_TAIL_CHARS = 4000
MAC_CHARS = 64
"""Hex digits of the HMAC-SHA256 that starts every frame on the result pipe."""
WARM_UP_FAILED = 3
"""The child's exit status when the harness itself could not start (before the job)."""

# Bound at import, before any candidate code runs in this process.
_os_write = os.write
_json_dumps = json.dumps
_hmac_new = hmac.new
_sha256 = hashlib.sha256
_clock = time.perf_counter
_urandom = os.urandom  # the timed calls' fresh inputs: the OS's randomness, as it is now


class ForgedFrameError(ValueError):
    """A frame on the result pipe that the harness did not write (bad or missing HMAC)."""


def _mac(key: bytes, payload: bytes) -> bytes:
    return _hmac_new(key, payload, _sha256).hexdigest().encode("ascii")


def write_frame(fd: int, message: Mapping[str, Any], *, key: bytes | None = None) -> None:
    """Send one length-prefixed JSON message on a pipe (HMAC-signed when given a key)."""
    payload = _json_dumps(message, allow_nan=True).encode("utf-8")
    if key is not None:
        payload = _mac(key, payload) + payload
    data = len(payload).to_bytes(4, "big") + payload
    view = memoryview(data)
    while view:
        written = _os_write(fd, view)
        view = view[written:]


class FrameReader:
    """Incremental decoder of length-prefixed JSON frames from a non-blocking source.

    With a ``key`` every frame must start with the HMAC of its JSON under that key; one
    that does not raises ForgedFrameError.
    """

    def __init__(self, max_frame_bytes: int = MAX_FRAME_BYTES, *, key: bytes | None = None):
        self.buffer = bytearray()
        self.max_frame_bytes = max_frame_bytes
        self.key = key

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        """Add bytes; return every complete message. ValueError on a malformed frame."""
        self.buffer.extend(data)
        messages = []
        while len(self.buffer) >= 4:
            size = int.from_bytes(self.buffer[:4], "big")
            if size > self.max_frame_bytes:
                raise ValueError(f"frame of {size} bytes exceeds {self.max_frame_bytes}")
            if len(self.buffer) < 4 + size:
                break
            payload = bytes(self.buffer[4 : 4 + size])
            del self.buffer[: 4 + size]
            if self.key is not None:
                mac, payload = payload[:MAC_CHARS], payload[MAC_CHARS:]
                if not hmac.compare_digest(mac, _mac(self.key, payload)):
                    raise ForgedFrameError("a frame without the harness's signature")
            message = json.loads(payload)
            if not isinstance(message, dict):
                raise ValueError("frame is not a JSON object")
            messages.append(message)
        return messages


def read_job(fd: int) -> dict[str, Any]:
    """Read the single job frame (the writer closes the pipe after it)."""
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    os.close(fd)
    (job,) = FrameReader().feed(b"".join(chunks))
    return job


def _traceback_tail(exc: BaseException) -> str:
    text = "".join(traceback.format_exception(exc))
    return text[-TRACEBACK_TAIL_CHARS:]


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


def _message_of(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


# --------------------------------------------------------------------------- the operator

_UPLOADED_SPECS: dict[str, Any] = {}


def operator_spec(job: Mapping[str, Any]) -> Any:
    """The job's operator: built in, or loaded once from the suite's uploaded sources.

    A job with ``operator_source`` (``{"files": {"reference.py": ..., "input.py": ...},
    "dtype": ...}``, see ``evaluator.upstream``) names an operator that the evaluator does
    not implement; its reference and input generator are imported from those files.
    """
    source = job.get("operator_source")
    if not source:
        from evaluator.operators import get_operator

        return get_operator(job["operator"])
    slug = str(job["operator"])
    if slug not in _UPLOADED_SPECS:
        import tempfile

        from evaluator.upstream import uploaded_operator_spec

        directory = tempfile.mkdtemp(prefix=f"atrex-operator-{slug}-", dir=os.getcwd())
        _UPLOADED_SPECS[slug] = uploaded_operator_spec(
            slug=slug,
            sources=source["files"],
            dtype=str(source.get("dtype", "")),
            directory=directory,
        )
    return _UPLOADED_SPECS[slug]


# --------------------------------------------------------------------------- one shape


def _refill(slot: dict[str, Any], fresh: Mapping[str, Any]) -> None:
    """Copy fresh inputs into a slot's tensors in place (same storage, new values)."""
    import torch

    for name, value in fresh.items():
        current = slot.get(name)
        if (
            isinstance(value, torch.Tensor)
            and isinstance(current, torch.Tensor)
            and current.shape == value.shape
            and current.dtype == value.dtype
            and current.stride() == value.stride()
        ):
            current.copy_(value)
        else:  # a different layout: a new tensor, still not the one kept as pristine
            slot[name] = value.clone() if isinstance(value, torch.Tensor) else value


def evaluate_shape(
    *,
    job: Mapping[str, Any],
    shape: Mapping[str, Any],
    model_class: Any,
    guard: Any = None,
) -> dict[str, Any]:
    """Correctness, fallback attribution and timing of one shape; a JSON-ready record.

    Status is ``pass``, ``incorrect`` or ``runtime_error`` here; the runner turns a pass
    with a low own-kernel share into ``fallback``. With an integrity ``guard``
    (``evaluator.integrity.IntegrityGuard``) every candidate call is followed by its
    checks: tampering makes the record a ``runtime_error`` flagged ``tampering`` (the
    whole operator fails), a thread left running makes it ``incorrect``.
    """
    import torch  # heavy imports stay out of the runner process, which imports this module

    from evaluator.correctness import CandidateError, check_shape
    from evaluator.fallback import monitor_for, report_for
    from evaluator.integrity import OutsideWorkError, TamperingError, bound_checker

    shape_id = str(shape["shape_id"])
    record: dict[str, Any] = {
        "shape_id": shape_id,
        "status": "runtime_error",
        "error": None,
        "warnings": [],
    }
    device = torch.device(job["device"])
    # Where the harness's own time goes (set-up and checks, then timing), for the run's
    # wall-time figures; the submission's score never depends on these.
    started = _clock()
    phases = record["wall_s"] = {}
    try:
        spec = operator_spec(job)
        init_kwargs = shape.get("init_kwargs") or {}

        def build_reference() -> Any:
            return spec.build_reference(init_kwargs).to(device)

        def reference(**inputs: Any) -> Any:
            # Built afresh for each check, after the candidate's call: an instance that
            # existed while the candidate ran is within its reach (the garbage collector
            # lists it) and could have been given another forward or hooks of its own.
            return build_reference()(**inputs)

        build_reference()  # a reference that cannot be built fails here, before the candidate
        try:
            candidate = model_class(**init_kwargs)
            if isinstance(candidate, torch.nn.Module):
                candidate = candidate.to(device)
        except Exception as exc:
            raise CandidateError(
                f"shape {shape_id}: Model(**{init_kwargs!r}) failed: {_message_of(exc)}"
            ) from exc
        # The correctness calls are also the ones watched for PyTorch fallbacks.
        monitor = monitor_for(device, own_code_dir=job.get("bundle_dir"))
        correctness = check_shape(
            spec=spec,
            reference=reference,
            candidate=candidate,
            shape_id=shape_id,
            input_kwargs=shape["input_kwargs"],
            device=device,
            run_seed=job["seed"],
            call_wrapper=monitor.call if monitor else None,
            after_call=bound_checker(guard, f"after a call of shape {shape_id}"),
        )
        record.update(
            max_abs_error=correctness.max_abs_error,
            mismatch_share=correctness.mismatch_share,
            trials=correctness.trials,
        )
        if not correctness.ok:
            record.update(status="incorrect", error=correctness.error)
            return record
        q_bytes = int(shape.get("q_read") or 0) + int(shape.get("q_write") or 0) or None
        fallback = report_for(monitor, q_bytes=q_bytes)
        record.update(
            own_kernel_share=fallback.own_kernel_share,
            share_by_time=fallback.share_by_time,
            share_by_bytes=fallback.share_by_bytes,
            top_ops=fallback.top_ops,
        )
        record["warnings"].extend(fallback.warnings)
        phases["checks"] = round(_clock() - started, 4)
        if fallback_not_timed(fallback.own_kernel_share, job):
            record.update(status="pass", not_timed=True)  # the runner makes it a fallback
            phases["timing"] = 0.0
            return record
        timed = _time_shape(
            job=job,
            shape=shape,
            spec=spec,
            reference=reference,
            build_reference=build_reference,
            candidate=candidate,
            device=device,
            checked_error_level=correctness.mean_tolerance_used,
            guard=guard,
            all_streams=fallback.other_stream_activities > 0,
        )
        record["warnings"].extend(timed.pop("warnings", []))
        record.update(timed)
        # The runner makes the shape a fallback with this error unless its own-kernel
        # share already does (a PyTorch bundle's watched calls are slow for other reasons).
        record["watched_time_s"] = fallback.observed_call_s
        record["unwatched_error"] = unwatched_path_error(
            shape_id, device.type, timed_s=record.get("time_s"), watched_s=fallback.observed_call_s
        )
        phases["timing"] = round(_clock() - started - phases["checks"], 4)
    except CandidateError as exc:
        record.update(
            status="runtime_error",
            error=exc.message,
            traceback=_traceback_tail(exc.__cause__ or exc),
        )
    except TamperingError as exc:
        record.update(status="runtime_error", error=f"shape {shape_id}: {exc.message}")
        record["tampering"] = True
    except OutsideWorkError as exc:
        record.update(status="incorrect", error=f"shape {shape_id}: {exc.message}")
    except BaseException as exc:  # SystemExit or worse from the candidate: this shape fails
        if isinstance(exc, KeyboardInterrupt):
            raise
        message = _message_of(exc)
        if isinstance(exc, SystemExit):
            message = f"the candidate called sys.exit({exc.code!r}) (SystemExit)"
        record.update(
            status="runtime_error",
            error=f"shape {shape_id}: {message}",
            traceback=_traceback_tail(exc),
        )
    phases["total"] = round(_clock() - started, 4)
    return record


def fallback_not_timed(own_share: float | None, job: Mapping[str, Any]) -> bool:
    """Whether a correct shape goes untimed: its own-kernel share is under the suite's
    threshold, so it is a ``fallback`` (``evaluator.results.shape_entry``, which says so in
    its error) and scores 0 whatever its speed. Timing it (at least 10 calls of the
    candidate and 10 of the reference) was most of the wall time of a submission with
    PyTorch in it: 434 of 758 s on the H200 for 20 operators, 12 of them references
    (results/2026-12-01-h200-session7)."""
    threshold = job.get("threshold_own_share")
    return threshold is not None and under_own_share_threshold(own_share, float(threshold))


UNWATCHED_SPEEDUP_LIMIT = {"cuda": 2.0, "cpu": 5.0}
"""How much faster the timed calls may run than the fastest watched correctness call
(after the first) before the shape is a ``fallback``: the fallback monitor watches only
the correctness calls, so a candidate that can tell it is watched (the profiler is on, a
dispatch mode is active) could run its own kernels there and PyTorch, or anything else,
when timed. An honest kernel's timed calls are not faster: on CUDA the timed calls flush
L2 first, and the watched figure is the busiest stream's kernel time alone (host gaps
between launches left out); on the CPU the watched calls carry only the interception's
overhead. The limits leave room for noise (CPU: a loaded machine) and catch a switch to a
path several times faster."""


def unwatched_path_error(
    shape_id: str, device_type: str, *, timed_s: float | None, watched_s: float | None
) -> str | None:
    """The error for a shape whose timed calls ran much faster than its watched calls, or
    None (also when either figure is missing)."""
    limit = UNWATCHED_SPEEDUP_LIMIT.get(device_type, UNWATCHED_SPEEDUP_LIMIT["cpu"])
    if not timed_s or not watched_s or timed_s <= 0 or watched_s <= limit * timed_s:
        return None
    return (
        f"shape {shape_id}: the timed calls ran {watched_s / timed_s:.1f}x faster than the "
        f"same calls under the fallback monitor ({timed_s * 1e6:.1f} us against "
        f"{watched_s * 1e6:.1f} us, limit {limit:g}x): the candidate takes another path when "
        "it is not watched, so its own-kernel share does not describe what was timed"
    )


ERROR_GROWTH_FACTOR = 2.0
ERROR_GROWTH_FLOOR = 0.3
"""The error grew over repeated calls when the last timed call's output used, on average
over its elements, more than this share of the tolerance and more than
ERROR_GROWTH_FACTOR times what the first call's did. An honest kernel's rounding error
does not depend on how often it has been called: one bf16 step off on every element
(the Triton interpreter truncates) uses about 0.1-0.2 of the tolerance on average, and
over the 19 smoke shapes of the 14 Triton baseline operators the last call's level was
0.68-1.23 times the first's. The exploit corpus's ``growing_error`` (a 1.2 % drift from
the seventh call on) reached 2.76-4.5 times its first level in ten runs: a factor of 3
let it through in about one run in four, 2 catches it with room on both sides."""


def _time_shape(
    *,
    job: Mapping[str, Any],
    shape: Mapping[str, Any],
    spec: Any,
    reference: Any,
    build_reference: Any,
    candidate: Any,
    device: Any,
    guard: Any = None,
    checked_error_level: float | None = None,
    all_streams: bool = False,
) -> dict[str, Any]:
    """Timing of a correct shape (candidate, then reference); timed outputs are checked.

    Two input slots are alternated, and before every call (outside the timed region) the
    slot's tensors are refilled in place with values drawn from fresh OS randomness, not
    from the run's seed: a result cached by pointer, object or seed is wrong, and one
    cached by content never hits. After each call the output is copied at once and the
    thread and clock checks run. After the loop, the reference runs on the last inputs of
    each slot: the last outputs must be right, unchanged since they were returned, not
    alias or modify their inputs, and the error must not have grown since the first call.
    """
    import torch

    from evaluator.correctness import (
        call_candidate,
        changed_after_return_error,
        clone_inputs,
        compare_outputs,
        hygiene_error,
        snapshot_outputs,
    )
    from evaluator.integrity import bound_checker
    from evaluator.timing import make_timer

    shape_id = str(shape["shape_id"])
    check_call = bound_checker(guard, f"after a timed call of shape {shape_id}", critical_only=True)

    def draw_seed() -> int:
        # Straight from the OS (bound before the candidate existed): Python's ``secrets``
        # and ``random`` read their bytes through module globals a candidate could replace
        # with a constant, making every "fresh" input the same and a cache by content hit.
        return int.from_bytes(_urandom(4), "little") & 0x7FFFFFFF

    def inputs_of(seed: int) -> dict[str, Any]:
        # Checks draw a call's inputs again from its seed, after the call: a copy kept from
        # before it is a tensor the candidate could find and rewrite while it ran.
        return spec.make_inputs(device=device, seed=seed, **shape["input_kwargs"])

    def failed(error: str, max_abs_error: float | None = None) -> dict[str, Any]:
        return {
            "status": "incorrect",
            "error": f"shape {shape_id}: {error}",
            "max_abs_error": max_abs_error,
        }

    with torch.inference_mode():
        seeds = [draw_seed(), draw_seed()]
        slots = [inputs_of(seed) for seed in seeds]
        outputs: list[Any] = [None, None]
        returned: list[Any] = [None, None]
        first_calls: list[Any] = []  # the first call's Comparison
        calls = [0]

        def before_call() -> None:
            seed = draw_seed()
            _refill(slots[calls[0] % 2], inputs_of(seed))
            seeds[calls[0] % 2] = seed

        def run_candidate() -> None:
            index = calls[0] % 2
            outputs[index] = call_candidate(candidate, slots[index], shape_id=shape_id)

        def after_call() -> None:
            index = calls[0] % 2
            calls[0] += 1
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            check_call()
            returned[index] = snapshot_outputs(outputs[index])
            if not first_calls:
                expected = reference(**inputs_of(seeds[index]))
                first_calls.append(
                    compare_outputs(
                        expected, returned[index], policy=spec.policy, shape_id=shape_id
                    )
                )

        def run_reference() -> None:
            timed_reference(**slots[calls[0] % 2])
            calls[0] += 1

        timer = make_timer(device)
        budget = job.get("time_budget_s")
        # The correctness trials already warmed the candidate up (and compiled its kernels).
        timing = timer.measure(
            run_candidate,
            budget_s=budget,
            warmup=1,
            before_call=before_call,
            after_call=after_call,
            all_streams=all_streams,
        )
        if guard is not None:
            guard.check(f"after the timed calls of shape {shape_id}")
        last_index = (calls[0] - 1) % 2
        last_used = 0.0
        first = first_calls[0] if first_calls else None
        if first is not None and not first.ok:
            return failed(
                f"a timed call returned a wrong result ({first.error})", first.max_abs_error
            )
        first_used = first.mean_tolerance_used if first is not None else 0.0
        if checked_error_level is not None:
            # The correctness trials are the earliest calls: a kernel that drifts only after
            # them is measured against their error, whenever the drift starts.
            first_used = min(first_used, checked_error_level) if first else checked_error_level
        for index in (0, 1):
            if outputs[index] is None:
                continue
            pristine = inputs_of(seeds[index])
            expected = reference(**clone_inputs(pristine))
            check = compare_outputs(
                expected, returned[index], policy=spec.policy, shape_id=shape_id
            )
            if not check.ok:
                return failed(
                    f"a timed call returned a wrong result ({check.error})", check.max_abs_error
                )
            problem = hygiene_error(
                outputs[index], slots[index], pristine, shape_id=shape_id
            ) or changed_after_return_error(returned[index], outputs[index], shape_id=shape_id)
            if problem:
                return failed(f"in a timed call: {problem}")
            if index == last_index:
                last_used = check.mean_tolerance_used
        if last_used > max(ERROR_GROWTH_FLOOR, ERROR_GROWTH_FACTOR * first_used):
            return failed(
                f"the error grew over repeated calls: the first calls' outputs used "
                f"{first_used:.0%} of the tolerance on average, the last of {calls[0]} calls "
                f"{last_used:.0%}"
            )
        timed_reference = build_reference()  # after the candidate's last call, like the checks
        reference_timing = timer.measure(run_reference, budget_s=budget)
    return {
        "status": "pass",
        "time_s": timing.median_s,
        "time_spread_s": timing.std_error_s,
        "reps": timing.reps,
        "host_time_s": timing.host_median_s,
        "reference_time_s": reference_timing.median_s,
        "reference_spread_s": reference_timing.std_error_s,
        "reference_reps": reference_timing.reps,
        "warnings": timing.warnings,
    }


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


def warm_up(device: str, steps: list[tuple[str, float]]) -> None:
    """Start everything the measurement uses, none of it the candidate's: import torch and
    the harness's modules (every built-in operator among them), set up the allocator and
    the device, start the profiler. Each step's end goes into ``steps`` (name,
    ``time.perf_counter()``). Runs before the job arrives."""
    import torch

    import evaluator.correctness
    import evaluator.fallback as evaluator_fallback
    import evaluator.integrity
    import evaluator.operators
    import evaluator.operators._variants
    import evaluator.static_scan
    import evaluator.timing
    import evaluator.variants

    del evaluator  # only imported so that they are loaded before the snapshot
    steps.append(("imports", time.perf_counter()))
    torch.empty(1)  # the allocator and dispatcher set up before the snapshot
    if torch.device(device).type == "cuda":
        torch.cuda.device_count()  # fills torch.cuda's lazy caches before the snapshot
    steps.append(("device", time.perf_counter()))
    evaluator_fallback.prepare_monitoring(torch.device(device))
    steps.append(("profiler", time.perf_counter()))


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
        # (evaluator.fallback.bind_interpreter): work hidden in a replaced launch would
        # count as the bundle's own.
        for name in ("InterpretedFunction", "GridExecutor"):
            cls = getattr(interpreter, name, None)
            if isinstance(cls, type):
                extra.append((f"triton.runtime.interpreter.{name}", cls.__dict__))
    return IntegrityGuard(extra=extra)


def run_job(
    job: dict[str, Any], result_fd: int, steps: list[tuple[str, float]] | None = None
) -> int:
    """Evaluate every shape of the job, streaming one record per shape; 0 when finished.

    ``steps`` are the warm-up's (see ``warm_up``), for the log line that says where the
    start-up went; the job may arrive long after them.

    With ``validation_variants`` in the job, the operator's hidden variants are checked
    first (one ``variant`` record each, see ``evaluator.variants``); if one fails, every
    shape is reported ``incorrect`` with its error, unmeasured.
    """
    key_hex = job.pop("auth_key", None)
    channel = _Channel(result_fd, bytes.fromhex(key_hex) if key_hex else None)
    del key_hex
    send = channel.send
    send({"event": "hello", "pid": os.getpid()})
    steps = [*(steps or []), ("job", time.perf_counter())]
    try:
        spec = operator_spec(job)
    except Exception as exc:  # an operator this evaluator does not implement: ours to fix
        send({"event": "harness_error", "error": _message_of(exc)})
        return 0
    # Bound before the candidate exists: it cannot swap the functions this loop calls.
    from evaluator.static_scan import scan_candidate  # stdlib only; before the snapshot

    steps.append(("operator", time.perf_counter()))
    guard = _integrity_guard(spec)
    steps.append(("snapshot", time.perf_counter()))
    send({"event": "ready"})  # the operator's reference is loaded, the snapshot taken
    # For the operator's log: where the start-up went ("job": waiting for its turn).
    durations = ", ".join(
        f"{b[0]} {b[1] - a[1]:.2f}" for a, b in zip(steps, steps[1:], strict=False)
    )
    print(f"[harness] start-up steps (s): {durations}", file=sys.stderr, flush=True)
    evaluate = evaluate_shape
    from evaluator.variants import check_variant, failed_variant_error, variants_of

    variants = variants_of(job)  # taken before the candidate exists
    bundle_dir = Path(job["bundle_dir"])
    from evaluator.fallback import FRAME_USER_CODES
    from evaluator.integrity import confine_bundle_code

    # From here on the bundle's code gets no frame objects (they lead to the harness's), no
    # ctypes and no processes of its own.
    confine_bundle_code(
        harness_dir=str(Path(__file__).parent),
        bundle_dir=str(bundle_dir),
        frame_users=FRAME_USER_CODES,
    )
    try:
        module = import_candidate(bundle_dir / job["module_path"], job["operator"], bundle_dir)
    except BaseException as exc:  # the candidate's import failed, whatever it raised
        send(
            {"event": "compile_error", "error": _message_of(exc), "traceback": _traceback_tail(exc)}
        )
        return 0
    send({"event": "imported"})
    from evaluator.integrity import TamperingError

    try:
        guard.check("while the candidate was imported")
    except TamperingError as exc:
        send({"event": "tampering", "error": exc.message})
        return 0
    scan_warnings = scan_candidate(module, bundle_dir)  # hints, once per operator
    variant_records = []
    for variant in variants:
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
    for shape in job["shapes"]:
        send({"event": "shape_start", "shape_id": shape["shape_id"]})
        if variant_error is not None:
            # A wrong answer at a variant makes every shape's answer untrustworthy.
            record = {
                "shape_id": shape["shape_id"],
                "status": "incorrect",
                "error": variant_error,
                "warnings": list(scan_warnings),
            }
            send({"event": "shape", "result": record})
            continue
        record = evaluate(job=job, shape=shape, model_class=module.Model, guard=guard)
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
                    "warnings": [],
                }
        send({"event": "shape", "result": record})
        if record.get("tampering"):
            send({"event": "tampering", "error": record["error"]})
            return 0
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
    args = parser.parse_args(argv)
    _not_dumpable()
    steps = [("start", time.perf_counter())]
    try:
        warm_up(args.device, steps)
    except BaseException:  # the harness could not start: say why in the log, exit 3
        traceback.print_exc()
        print("[harness] the evaluation harness could not start", file=sys.stderr, flush=True)
        return WARM_UP_FAILED
    from evaluator.integrity import deny_object_enumeration

    deny_object_enumeration()  # before any candidate code: no gc.get_objects() and kin
    job = read_job(args.job_fd)
    # Keep the result pipe off the candidate's obvious path: a copy at a high number,
    # close-on-exec, the original closed (the candidate runs in this process, so this
    # is hygiene, not a security boundary; sandboxing is the worker's job).
    result_fd = os.dup(args.result_fd)
    os.close(args.result_fd)
    os.set_inheritable(result_fd, False)
    return run_job(job, result_fd, steps)


if __name__ == "__main__":
    code = main()
    # Leave without running atexit handlers or waiting for threads the candidate left.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
