"""The per-operator child process: import the candidate, then check and time each shape.

Started by the runner as ``python -m evaluator.child --job-fd R --result-fd W``. The job
(operator, bundle file, shapes, device, seed, budget) arrives as one frame on the job
pipe; per-shape records go back as frames on the result pipe, as they complete. A
frame is a 4-byte big-endian length and that many bytes of UTF-8 JSON. The child's
stdout and stderr are the candidate's log; nothing is ever parsed from them.

Module-level imports are stdlib only: the runner imports the framing helpers from here
without loading torch.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import secrets
import sys
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

MAX_FRAME_BYTES = 16 * 1024 * 1024
TRACEBACK_TAIL_CHARS = 4000


def write_frame(fd: int, message: Mapping[str, Any]) -> None:
    """Send one length-prefixed JSON message on a pipe."""
    payload = json.dumps(message, allow_nan=True).encode("utf-8")
    data = len(payload).to_bytes(4, "big") + payload
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


class FrameReader:
    """Incremental decoder of length-prefixed JSON frames from a non-blocking source."""

    def __init__(self, max_frame_bytes: int = MAX_FRAME_BYTES) -> None:
        self.buffer = bytearray()
        self.max_frame_bytes = max_frame_bytes

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


def evaluate_shape(
    *, job: Mapping[str, Any], shape: Mapping[str, Any], model_class: Any
) -> dict[str, Any]:
    """Correctness, fallback attribution and timing of one shape; a JSON-ready record.

    Status is ``pass``, ``incorrect`` or ``runtime_error`` here; the runner turns a pass
    with a low own-kernel share into ``fallback``.
    """
    import torch  # heavy imports stay out of the runner process, which imports this module

    from evaluator.correctness import CandidateError, check_shape
    from evaluator.fallback import monitor_for, report_for

    shape_id = str(shape["shape_id"])
    record: dict[str, Any] = {
        "shape_id": shape_id,
        "status": "runtime_error",
        "error": None,
        "warnings": [],
    }
    device = torch.device(job["device"])
    try:
        spec = operator_spec(job)
        init_kwargs = shape.get("init_kwargs") or {}
        reference = spec.build_reference(init_kwargs).to(device)
        try:
            candidate = model_class(**init_kwargs)
            if isinstance(candidate, torch.nn.Module):
                candidate = candidate.to(device)
        except Exception as exc:
            raise CandidateError(
                f"shape {shape_id}: Model(**{init_kwargs!r}) failed: {_message_of(exc)}"
            ) from exc
        # The correctness calls are also the ones watched for PyTorch fallbacks.
        monitor = monitor_for(device)
        correctness = check_shape(
            spec=spec,
            reference=reference,
            candidate=candidate,
            shape_id=shape_id,
            input_kwargs=shape["input_kwargs"],
            device=device,
            run_seed=job["seed"],
            call_wrapper=monitor.call if monitor else None,
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
        timed = _time_shape(
            job=job, shape=shape, spec=spec, reference=reference, candidate=candidate, device=device
        )
        record["warnings"].extend(timed.pop("warnings", []))
        record.update(timed)
    except CandidateError as exc:
        record.update(
            status="runtime_error",
            error=exc.message,
            traceback=_traceback_tail(exc.__cause__ or exc),
        )
    except BaseException as exc:  # SystemExit or worse from the candidate: this shape fails
        if isinstance(exc, KeyboardInterrupt):
            raise
        record.update(
            status="runtime_error",
            error=f"shape {shape_id}: {_message_of(exc)}",
            traceback=_traceback_tail(exc),
        )
    return record


def _time_shape(
    *,
    job: Mapping[str, Any],
    shape: Mapping[str, Any],
    spec: Any,
    reference: Any,
    candidate: Any,
    device: Any,
) -> dict[str, Any]:
    """Timing of a correct shape (candidate, then reference); timed outputs are checked."""
    import torch

    from evaluator.correctness import call_candidate, compare_outputs, derive_seed
    from evaluator.timing import make_timer

    shape_id = str(shape["shape_id"])
    seed, operator = job["seed"], job["operator"]
    with torch.inference_mode():
        # Two input sets, alternated: a kernel that serves a stale result shows up.
        input_sets = [
            spec.make_inputs(
                device=device,
                seed=derive_seed(seed, "timing", operator, shape_id, k),
                **shape["input_kwargs"],
            )
            for k in (0, 1)
        ]
        expected = [reference(**inputs) for inputs in input_sets]
        last_outputs: list[Any] = [None, None]
        calls = [0]

        def run_candidate() -> None:
            index = calls[0] % 2
            calls[0] += 1
            last_outputs[index] = call_candidate(candidate, input_sets[index], shape_id=shape_id)

        def run_reference() -> None:
            reference(**input_sets[calls[0] % 2])
            calls[0] += 1

        timer = make_timer(device)
        budget = job.get("time_budget_s")
        # The correctness trials already warmed the candidate up (and compiled its kernels).
        timing = timer.measure(run_candidate, budget_s=budget, warmup=1)
        for index in (0, 1):
            if last_outputs[index] is None:
                continue
            check = compare_outputs(
                expected[index], last_outputs[index], policy=spec.policy, shape_id=shape_id
            )
            if not check.ok:
                return {
                    "status": "incorrect",
                    "error": f"a timed call returned a wrong result ({check.error})",
                    "max_abs_error": check.max_abs_error,
                }
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


def run_job(job: Mapping[str, Any], result_fd: int) -> int:
    """Evaluate every shape of the job, streaming one record per shape; 0 when finished."""
    send = lambda message: write_frame(result_fd, message)  # noqa: E731
    send({"event": "hello", "pid": os.getpid()})
    try:
        operator_spec(job)
    except Exception as exc:  # an operator this evaluator does not implement: ours to fix
        send({"event": "harness_error", "error": _message_of(exc)})
        return 0
    bundle_dir = Path(job["bundle_dir"])
    try:
        module = import_candidate(bundle_dir / job["module_path"], job["operator"], bundle_dir)
    except BaseException as exc:  # the candidate's import failed, whatever it raised
        send(
            {"event": "compile_error", "error": _message_of(exc), "traceback": _traceback_tail(exc)}
        )
        return 0
    send({"event": "imported"})
    for shape in job["shapes"]:
        send({"event": "shape_start", "shape_id": shape["shape_id"]})
        record = evaluate_shape(job=job, shape=shape, model_class=module.Model)
        send({"event": "shape", "result": record})
    send({"event": "done"})
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m evaluator.child``."""
    parser = argparse.ArgumentParser(prog="evaluator.child")
    parser.add_argument("--job-fd", type=int, required=True)
    parser.add_argument("--result-fd", type=int, required=True)
    args = parser.parse_args(argv)
    job = read_job(args.job_fd)
    # Keep the result pipe off the candidate's obvious path: a copy at a high number,
    # close-on-exec, the original closed (the candidate runs in this process, so this
    # is hygiene, not a security boundary; sandboxing is the worker's job).
    result_fd = os.dup(args.result_fd)
    os.close(args.result_fd)
    os.set_inheritable(result_fd, False)
    return run_job(job, result_fd)


if __name__ == "__main__":
    sys.exit(main())
