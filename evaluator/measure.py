"""The measurement of one shape in the per-operator child: correctness (the calls watched
by the fallback monitor), then timing, each timed output checked (``evaluate_shape``).

Runs inside ``python -m evaluator.child`` (``evaluator.child``), in the same process as the
candidate, after the harness has bound everything it measures with and taken its integrity
snapshot. Module-level imports are light (no torch): the child imports this module before
it warms up.
"""

from __future__ import annotations

import gc
import os
import time
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# Light (no torch) and bound at import, before any candidate code runs in this process.
from evaluator.measurement_policy import MeasurementPolicy
from evaluator.results import under_own_share_threshold

TRACEBACK_TAIL_CHARS = 4000

# Bound at import, before any candidate code runs in this process.
_clock = time.perf_counter
_urandom = os.urandom  # the timed calls' fresh inputs: the OS's randomness, as it is now


def traceback_tail(exc: BaseException) -> str:
    """The end of ``exc``'s formatted traceback, for a record."""
    text = "".join(traceback.format_exception(exc))
    return text[-TRACEBACK_TAIL_CHARS:]


def message_of(exc: BaseException) -> str:
    """``TypeName: message`` of an exception."""
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


def build_candidate(
    model_class: Any, init_kwargs: Mapping[str, Any], device: Any, shape_id: str
) -> Any:
    """``Model(**init_kwargs)`` on ``device``; a candidate that cannot be built raises
    ``CandidateError`` saying so."""
    import torch

    from evaluator.correctness import CandidateError

    try:
        candidate = model_class(**init_kwargs)
        if isinstance(candidate, torch.nn.Module):
            candidate = candidate.to(device)
    except Exception as exc:
        raise CandidateError(
            f"shape {shape_id}: Model(**{init_kwargs!r}) failed: {message_of(exc)}"
        ) from exc
    return candidate


def rehearse_checks(job: Mapping[str, Any], *, scans: Any = None) -> float:
    """The checks of the job's smallest shape, once, on the operator's reference as the
    candidate, and the fallback report's module scan (filling ``scans``, the child's
    ``ModuleScanMemo``); the seconds it took. Nothing of it is kept or reported.

    A child's first shape paid for the first use of every device function its checks call:
    in a CUDA process each is loaded at its first launch (the input generator's, the
    reference's, the comparison's: about 0.2 s of rms_norm's first shape on the H200,
    ``results/2026-12-04-h200-session21``). The child runs this while something else holds
    the round up (``evaluator.compile_ahead``'s forks compiling the candidate's kernels), so
    those loads leave the first shape. Its inputs come from a seed of its own purpose
    ("rehearsal"), never a trial's: what it leaves in freed memory answers no check. Only
    harness code runs (the reference is built-in or the suite's), after the integrity check
    of the candidate's import; the child checks again after it. Raises what the checks
    raise (the caller ignores it: a rehearsal decides nothing)."""
    import torch

    from evaluator.correctness import check_shape, derive_seed, fresh_reference
    from evaluator.fallback_cuda import kernel_origins

    started = _clock()
    spec = operator_spec(job)
    device = torch.device(job["device"])
    shape = min(
        job["shapes"],
        key=lambda s: (int(s.get("q_read") or 0) + int(s.get("q_write") or 0), str(s["shape_id"])),
    )
    init_kwargs = shape.get("init_kwargs") or {}
    check_shape(
        spec=spec,
        reference=fresh_reference(spec, init_kwargs, device),
        candidate=spec.build_reference(init_kwargs).to(device),
        shape_id=str(shape["shape_id"]),
        input_kwargs=shape["input_kwargs"],
        device=device,
        run_seed=derive_seed(job["seed"], "rehearsal"),
        trials=1,
    )
    if device.type == "cuda" and job.get("bundle_dir"):
        kernel_origins(Path(job["bundle_dir"]), scans)
    return round(_clock() - started, 4)


def evaluate_shape(
    *,
    job: Mapping[str, Any],
    shape: Mapping[str, Any],
    model_class: Any,
    guard: Any = None,
    pool: Any = None,
    gate: Any = None,
    scans: Any = None,
) -> dict[str, Any]:
    """Correctness, fallback attribution and timing of one shape; a JSON-ready record
    (``_evaluate_shape``). ``scans``: the child's ``fallback_cuda.ModuleScanMemo``, which
    its shapes' fallback reports share (CUDA).

    Beside other children (a ``gate``), a shape that ran out of device memory is evaluated
    once more from the start inside a window of its own (``purpose`` ``alone``: every
    other child paused at a safe point, its cached memory released), and that second
    record is the shape's: the memory the others held is not the candidate's failure.
    ``alone_after`` in the record keeps the first error. Out of memory alone is the
    candidate's (or the shape's) own, as in a run one operator at a time.
    """
    record = _evaluate_shape(
        job=job, shape=shape, model_class=model_class, guard=guard, pool=pool, gate=gate,
        scans=scans,
    )  # fmt: skip
    if gate is None or "out_of_memory" not in (record.get("codes") or []):
        return record
    first_error = record.get("error")
    del record
    gc.collect()  # what the failed attempt left, before the cache is handed back
    gate.release()
    with gate.window(str(shape["shape_id"]), purpose="alone"):
        again = _evaluate_shape(
            job=job, shape=shape, model_class=model_class, guard=guard, pool=pool, gate=None,
            scans=scans,
        )  # fmt: skip
    again["alone_after"] = {"error": first_error}
    return again


def _evaluate_shape(
    *,
    job: Mapping[str, Any],
    shape: Mapping[str, Any],
    model_class: Any,
    guard: Any = None,
    pool: Any = None,
    gate: Any = None,
    scans: Any = None,
) -> dict[str, Any]:
    """Correctness, fallback attribution and timing of one shape; a JSON-ready record.

    Status is ``pass``, ``incorrect`` or ``runtime_error`` here; the runner turns a pass
    with a low own-kernel share into ``fallback``. With an integrity ``guard``
    (``evaluator.integrity.IntegrityGuard``) every candidate call is followed by its
    checks: tampering makes the record a ``runtime_error`` flagged ``tampering`` (the
    whole operator fails), a thread left running makes it ``incorrect``.

    With a ``pool`` (``evaluator.reference_pool.PoolClient``) and a trial plan in the
    shape (``shape["pool"]``), pooled correctness trials take their seed and reference
    output from the worker's pool; the record's ``reference_pool`` says how many did and
    why any was recomputed. The timed calls' inputs stay fresh OS randomness.

    With a ``gate`` (``evaluator.concurrency.TimingGate``: other operators' children run
    beside this one) the timing, and the watched-against-timed check, happen inside the
    exclusive timing window; a check that fires on a shape whose watched calls ran beside
    another child is decided on the watched figure measured again inside the window
    (``watch_again``; the record's ``watch_confirmed``).
    """
    import torch  # heavy imports stay out of the runner process, which imports this module

    from evaluator.correctness import (
        CandidateError,
        PhaseClock,
        check_shape,
        derive_seed,
        fresh_reference,
    )
    from evaluator.fallback import ShapeWatch, monitor_for, report_for
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
        # The run's measurement policy (evaluator.measurement_policy): a campaign's round
        # may ask for fewer trials and a lighter timing rule than a full evaluation.
        measurement = MeasurementPolicy.from_dict(job.get("measurement"))
        trials = measurement.trials_for(spec.policy.trials)

        def build_reference() -> Any:
            return spec.build_reference(init_kwargs).to(device)

        reference = fresh_reference(spec, init_kwargs, device)  # afresh for each check

        build_reference()  # a reference that cannot be built fails here, before the candidate
        candidate = build_candidate(model_class, init_kwargs, device, shape_id)

        # The correctness calls are also the ones watched for PyTorch fallbacks: every
        # correctness trial (check_shape runs the policy's count); the report comes only when
        # all of them passed. A first call that launched none of the bundle's own kernels
        # decides the shape (a fallback, untimed, scored 0): no later trial runs.
        def watch(calls: int, *, decide_on_first_call: bool) -> Any:
            return ShapeWatch(
                monitor_for(device, own_code_dir=job.get("bundle_dir"), calls=calls, scans=scans),
                decide_on_first_call=decide_on_first_call,
            )

        def watched_checks(watched: Any, **kwargs: Any) -> Any:
            """The shape's correctness trials, each call watched by ``watched``."""
            return check_shape(
                spec=spec,
                reference=reference,
                candidate=candidate,
                shape_id=shape_id,
                input_kwargs=shape["input_kwargs"],
                device=device,
                call_wrapper=watched.call,
                settled=watched.settled,
                after_call=bound_checker(guard, f"after a call of shape {shape_id}"),
                phases=phases,
                # Where another operator's timing may pause this child (a concurrent run).
                safe_point=gate.safe_point if gate is not None else None,
                **kwargs,
            )

        monitor = watch(trials, decide_on_first_call=fallback_not_timed(0.0, job))
        phases["setup"] = round(_clock() - started, 4)  # reference and Model built
        pool_plan = shape.get("pool") if pool is not None else None
        pool_record: dict[str, Any] | None = None
        if pool_plan:
            planned = sum(1 for slot in pool_plan if slot is not None)
            pool_record = record["reference_pool"] = {
                "planned": planned,
                "pooled": 0,
                "recomputed": [],
            }
        correctness = watched_checks(
            monitor,
            run_seed=job["seed"],
            trials=trials,
            pool_plan=pool_plan,
            fetch_reference=(
                (lambda shape_id, entry: pool.fetch(shape_id, entry, device)) if pool_plan else None
            ),
            pool_record=pool_record,
        )
        record.update(
            max_abs_error=correctness.max_abs_error,
            mismatch_share=correctness.mismatch_share,
            trials=correctness.trials,
            watched_calls=monitor.watched_calls,
        )
        if not correctness.ok:
            record.update(status="incorrect", error=correctness.error, codes=["wrong_result"])
            return record
        q_bytes = int(shape.get("q_read") or 0) + int(shape.get("q_write") or 0) or None
        with PhaseClock(device, phases)("fb_report"):
            fallback = report_for(monitor, q_bytes=q_bytes)
        if second_look_due(fallback, job, device.type):
            # A near miss on the CPU: the shape is checked and watched again, over more
            # calls, and the second look decides (its answers checked like the first's).
            first_share = fallback.own_kernel_share
            look = watch(SECOND_LOOK_CALLS, decide_on_first_call=True)
            again = watched_checks(  # its phases add to the first look's
                look,
                run_seed=derive_seed(int(job["seed"]), "second_look"),
                trials=SECOND_LOOK_CALLS,
            )
            if not again.ok:
                record.update(status="incorrect", error=again.error, codes=["wrong_result"])
                return record
            fallback = report_for(look, q_bytes=q_bytes)
            record["second_look"] = {
                "first_own_kernel_share": first_share,
                "own_kernel_share": fallback.own_kernel_share,
                "calls": look.watched_calls,
            }
        record.update(
            own_kernel_share=fallback.own_kernel_share,
            share_by_time=fallback.share_by_time,
            share_by_bytes=fallback.share_by_bytes,
            top_ops=fallback.top_ops,
            fallback_decided_on_first_call=fallback.decided_on_first_call,
        )
        record["warnings"].extend(fallback.warnings)
        phases["checks"] = round(_clock() - started, 4)
        if fallback_not_timed(fallback.own_kernel_share, job):
            record.update(status="pass", not_timed=True)  # the runner makes it a fallback
            phases["timing"] = 0.0
            return record
        with gate.window(shape_id) if gate is not None else _alone() as shared:
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
                phase=PhaseClock(device, phases),
                timing_rule=measurement.timing_rule(),
            )
            record["warnings"].extend(timed.pop("warnings", []))
            record.update(timed)
            # The runner makes the shape a fallback with this error unless its own-kernel
            # share already does (a PyTorch bundle's watched calls are slow for other
            # reasons). On the CPU both figures are counted time (evaluator.counted_time),
            # not wall time.
            watched_s = fallback.observed_call_s
            compared_s = record.get("counted_time_s") or record.get("time_s")
            error = unwatched_path_error(
                shape_id, device.type, timed_s=compared_s, watched_s=watched_s
            )
            if error is not None and shared:
                # Watched beside other children, which may have slowed those calls: the
                # figure is taken again here, alone, and the same check decides.
                again = watch_again(
                    job=job, shape=shape, spec=spec, candidate=candidate, device=device,
                    guard=guard, q_bytes=q_bytes,
                )  # fmt: skip
                watched_s = again.observed_call_s
                error = unwatched_path_error(
                    shape_id, device.type, timed_s=compared_s, watched_s=watched_s
                )
                record["watch_confirmed"] = {
                    "shared_watched_time_s": fallback.observed_call_s,
                    "watched_time_s": watched_s,
                    "own_kernel_share": again.own_kernel_share,
                    "confirmed": error is not None,
                }
                if again.own_kernel_share is not None and (
                    record.get("own_kernel_share") is None
                    or again.own_kernel_share < record["own_kernel_share"]
                ):
                    # The lower share of the two watches: the second cannot clear a
                    # candidate that left its own kernels once watched calls outran the
                    # correctness trials.
                    record["own_kernel_share"] = again.own_kernel_share
            record["watched_time_s"] = watched_s
            record["unwatched_speedup"] = unwatched_speedup(timed_s=compared_s, watched_s=watched_s)
            record["unwatched_error"] = error
        phases["timing"] = round(_clock() - started - phases["checks"], 4)
    except CandidateError as exc:
        record.update(
            status="runtime_error",
            error=exc.message,
            traceback=traceback_tail(exc.__cause__ or exc),
            codes=[loud_code(exc.__cause__ or exc)],
        )
    except TamperingError as exc:
        record.update(status="runtime_error", error=f"shape {shape_id}: {exc.message}")
        record.update(tampering=True, codes=["tampering"])
    except OutsideWorkError as exc:
        record.update(
            status="incorrect", error=f"shape {shape_id}: {exc.message}", codes=["outside_work"]
        )
    except BaseException as exc:  # SystemExit or worse from the candidate: this shape fails
        if isinstance(exc, KeyboardInterrupt):
            raise
        message = message_of(exc)
        if isinstance(exc, SystemExit):
            message = f"the candidate called sys.exit({exc.code!r}) (SystemExit)"
        record.update(
            status="runtime_error",
            error=f"shape {shape_id}: {message}",
            traceback=traceback_tail(exc),
            codes=[loud_code(exc)],
        )
    phases["total"] = round(_clock() - started, 4)
    return record


def _alone() -> Any:
    """The timing window of a child alone on its device: nothing to wait for, and no
    other child ran beside its watched calls."""
    import contextlib

    return contextlib.nullcontext(False)


def watch_again(
    *,
    job: Mapping[str, Any],
    shape: Mapping[str, Any],
    spec: Any,
    candidate: Any,
    device: Any,
    guard: Any = None,
    q_bytes: int | None = None,
) -> Any:
    """The fallback monitor's report over the policy's number of candidate calls again
    (inputs from the run's seed, drawn afresh for this watch; the answers were checked
    before), for a shape whose first watched figures were taken beside other children:
    called inside the exclusive timing window (``evaluator.concurrency``)."""
    import torch

    from evaluator.correctness import call_candidate, derive_seed
    from evaluator.fallback import monitor_for, report_for
    from evaluator.integrity import bound_checker

    shape_id = str(shape["shape_id"])
    calls = max(2, int(spec.policy.trials))  # the figure is the fastest call after the first
    monitor = monitor_for(device, own_code_dir=job.get("bundle_dir"), calls=calls)
    check_call = bound_checker(guard, f"after a watched call of shape {shape_id} (alone)")
    with torch.inference_mode():
        for call in range(calls):
            seed = derive_seed(job["seed"], "watch_alone", spec.slug, shape_id, call)
            inputs = spec.make_inputs(device=device, seed=seed, **dict(shape["input_kwargs"]))
            monitor.call(lambda inputs=inputs: call_candidate(candidate, inputs, shape_id=shape_id))
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            check_call()
    return report_for(monitor, q_bytes=q_bytes)


def sanitized_call(
    *, job: Mapping[str, Any], shape: Mapping[str, Any], model_class: Any, guard: Any = None
) -> dict[str, Any]:
    """One call of the candidate at ``shape`` under ``compute-sanitizer`` (evaluator.sanitizer),
    for its memory accesses only: the inputs of the first correctness trial, the device
    synchronised after the call (every stream's work done, so the tool has seen every
    kernel of it), no reference (the regular child checked the answer), no monitor, no
    timing. A candidate thread left running or tampering after the call makes it
    ``incorrect`` or ``runtime_error`` as in ``evaluate_shape`` (the runner then keeps the
    operator's window open)."""
    import torch

    from evaluator.correctness import CandidateError, call_candidate, derive_seed
    from evaluator.integrity import OutsideWorkError, TamperingError, bound_checker

    shape_id = str(shape["shape_id"])
    record: dict[str, Any] = {"shape_id": shape_id, "status": "runtime_error", "error": None}
    device = torch.device(job["device"])
    try:
        spec = operator_spec(job)
        init_kwargs = shape.get("init_kwargs") or {}
        candidate = build_candidate(model_class, init_kwargs, device, shape_id)
        seed = derive_seed(job["seed"], "correctness", spec.slug, shape_id, 0)
        with torch.inference_mode():
            inputs = spec.make_inputs(device=device, seed=seed, **dict(shape["input_kwargs"]))
            call_candidate(candidate, inputs, shape_id=shape_id)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
        bound_checker(guard, f"after the sanitized call of shape {shape_id}")()
        record.update(status="pass")
    except CandidateError as exc:
        record.update(error=exc.message, codes=[loud_code(exc.__cause__ or exc)])
    except TamperingError as exc:
        record.update(error=f"shape {shape_id}: {exc.message}", tampering=True, codes=["tampering"])
    except OutsideWorkError as exc:
        record.update(
            status="incorrect", error=f"shape {shape_id}: {exc.message}", codes=["outside_work"]
        )
    except BaseException as exc:  # SystemExit or worse from the candidate: this call fails
        if isinstance(exc, KeyboardInterrupt):
            raise
        record.update(error=f"shape {shape_id}: {message_of(exc)}", codes=[loud_code(exc)])
    return record


def loud_code(exc: BaseException) -> str:
    """The verdict code of a loud failure: ``out_of_memory`` for PyTorch's out-of-memory
    error (on any device), ``exception`` for anything else the candidate raised."""
    import torch

    return "out_of_memory" if isinstance(exc, torch.OutOfMemoryError) else "exception"


def fallback_not_timed(own_share: float | None, job: Mapping[str, Any]) -> bool:
    """Whether a correct shape goes untimed: its own-kernel share is under the suite's
    threshold, so it is a ``fallback`` (``evaluator.results.shape_entry``, which says so in
    its error) and scores 0 whatever its speed. Timing it (at least 10 calls of the
    candidate and 10 of the reference) was most of the wall time of a submission with
    PyTorch in it: 434 of 758 s on the H200 for 20 operators, 12 of them references
    (results/2026-12-01-h200-session7). ``fallback_not_timed(0.0, job)`` also says whether a
    first call that launched none of the bundle's own kernels decides its shape
    (``evaluator.fallback.ShapeWatch``): not under a threshold of 0, where no share is a
    fallback."""
    threshold = job.get("threshold_own_share")
    return threshold is not None and under_own_share_threshold(own_share, float(threshold))


SECOND_LOOK_MARGIN = 0.3
"""How far under the suite's own-kernel threshold a CPU shape's share may fall and still
be looked at again (``second_look_due``)."""

SECOND_LOOK_CALLS = 5
"""The calls of a second look: their median call decides, so two stray calls do not."""


def second_look_due(report: Any, job: Mapping[str, Any], device_type: str) -> bool:
    """Whether a correct CPU shape whose own-kernel share fell just under the threshold
    (by less than ``SECOND_LOOK_MARGIN``) is checked and watched again over
    ``SECOND_LOOK_CALLS`` calls, the second look deciding it.

    On the CPU a share is a ratio of counted times (``evaluator.fallback_cpu``), and a
    smoke shape's call takes a few milliseconds, so one stray millisecond outside the
    bundle's kernels (a garbage collection, a page read back from disk on a host short of
    memory) moves a call's share by a fifth; with two watched calls (an agent round's
    policy) the median is their mean, and an honest Triton kernel that measures 0.93 was
    seen at 0.76 on a loaded 2-core CI host. On CUDA the shares are kernel times from the
    profiler, and not looked at again. A shape decided on its first call (none of the
    bundle's own kernels launched) is not a near miss. A candidate gains nothing from
    telling the looks apart: the second look's answers are checked as the first's were,
    its calls are watched the same way, and its fastest call is the figure the timed calls
    are compared with (``UNWATCHED_SPEEDUP_LIMIT``)."""
    if device_type != "cpu" or report.decided_on_first_call:
        return False
    share = report.own_kernel_share
    return fallback_not_timed(share, job) and share >= (
        float(job["threshold_own_share"]) - SECOND_LOOK_MARGIN
    )


UNWATCHED_SPEEDUP_LIMIT = {"cuda": 2.0, "cpu": 5.0}
"""How much faster the timed calls may run than the fastest watched correctness call
(after the first) before the shape is a ``fallback``: the fallback monitor watches only
the correctness calls, so a candidate that can tell it is watched (the profiler is on, a
dispatch mode is active) could run its own kernels there and PyTorch, or anything else,
when timed. An honest kernel's timed calls are not faster: on CUDA the timed calls flush
L2 first, and the watched figure is the busiest stream's kernel time alone (host gaps
between launches left out); on the CPU the watched calls carry only the interception's
overhead, and both figures are counted time (``evaluator.counted_time``), so a loaded
host's waits for a CPU neither make an honest kernel's watched calls look slow nor hide a
switch in slow timed calls. The limits leave room for noise and catch a switch to a path
several times faster."""


def unwatched_speedup(*, timed_s: float | None, watched_s: float | None) -> float | None:
    """How many times faster the timed calls ran than the watched ones (``watched_s /
    timed_s``; the shape's ``unwatched_speedup``), or None when either figure is missing."""
    if not timed_s or not watched_s or timed_s <= 0 or watched_s <= 0:
        return None
    return watched_s / timed_s


def unwatched_path_error(
    shape_id: str, device_type: str, *, timed_s: float | None, watched_s: float | None
) -> str | None:
    """The error for a shape whose timed calls ran much faster than its watched calls
    (``UNWATCHED_SPEEDUP_LIMIT``), or None (also when either figure is missing): the one
    watched-against-timed check. ``watched_s`` is the fallback report's
    ``observed_call_s``; ``timed_s`` the timer's ``counted_median_s`` on the CPU (both
    counted time there), its ``median_s`` on CUDA."""
    limit = UNWATCHED_SPEEDUP_LIMIT.get(device_type, UNWATCHED_SPEEDUP_LIMIT["cpu"])
    speedup = unwatched_speedup(timed_s=timed_s, watched_s=watched_s)
    if speedup is None or timed_s is None or watched_s is None or speedup <= limit:
        return None
    return (
        f"shape {shape_id}: the timed calls ran {speedup:.1f}x faster than the "
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


def build_eager(
    job: Mapping[str, Any], shape: Mapping[str, Any], build_reference: Any, device: Any
) -> tuple[Any, str, str | None]:
    """The eager PyTorch whose time "speedup over eager" divides by: the operator's
    idiomatic baseline (``evaluator.baselines``, docs/baselines.md; checked against the
    reference by the operator's policy in the test suite and on the GPU), ``"baseline"``;
    or its reference, ``"reference"``, for an operator uploaded with its own sources (no
    baseline) or one whose baseline cannot be built here (the note says why). The
    baselines are imported before the integrity guard's snapshot (``child.warm_up``), so a
    candidate that slows one down to inflate its speedup is caught as tampering."""
    if job.get("operator_source"):
        return build_reference(), "reference", None
    try:
        from evaluator.baselines import get_baseline

        model = get_baseline(str(job["operator"]))(**(shape.get("init_kwargs") or {}))
        return model.to(device), "baseline", None
    except Exception as exc:  # the harness's own code: the reference stands in
        return (
            build_reference(),
            "reference",
            f"the eager baseline could not be built ({message_of(exc)}): the speedup over "
            "eager divides by the reference's time",
        )


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
    phase: Any = None,
    timing_rule: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Timing of a correct shape (candidate, then reference); timed outputs are checked.

    Two input slots are alternated, and before every call (outside the timed region) the
    slot's tensors are refilled in place with values drawn from fresh OS randomness, not
    from the run's seed: a result cached by pointer, object or seed is wrong, and one
    cached by content never hits. After each call the output is copied at once and the
    thread and clock checks run. After the loop, the reference runs on the last inputs of
    each slot: the last outputs must be right, unchanged since they were returned, not
    alias or modify their inputs, and the error must not have grown since the first call.
    ``phase`` (``evaluator.correctness.PhaseClock``) adds the seconds of the parts to the
    shape's ``wall_s``: ``timed_inputs`` and ``timed_first_check`` (the hooks around the
    timed calls, outside the timed region), ``timed_candidate`` (the candidate's timing
    loop, its hooks included), ``timed_checks`` (after the loop), ``timed_reference``.
    The eager figure (``reference_time_s``, the denominator of the speedup) is the
    operator's idiomatic baseline's time (``build_eager``; ``eager_timed`` says which ran).
    A shape that carries the worker's cached eager time (``shape["reference_time"]``,
    ``evaluator.reference_timings``) reports it instead of timing it. ``timing_rule``
    (``min_reps``, ``target_rel_se``: the run's ``MeasurementPolicy``) times both.
    """
    import torch

    from evaluator.correctness import (
        PhaseClock,
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
    phase = phase or PhaseClock(device, None)
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
        # Its watched calls were right (they came first): the timed path is another one.
        return {
            "status": "incorrect",
            "error": f"shape {shape_id}: {error}",
            "max_abs_error": max_abs_error,
            "codes": ["timed_wrong"],
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
            with phase("timed_inputs"):
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
                with phase("timed_first_check"):
                    expected = reference(**inputs_of(seeds[index]))
                    first_calls.append(
                        compare_outputs(
                            expected, returned[index], policy=spec.policy, shape_id=shape_id
                        )
                    )

        def run_reference() -> None:
            timed_reference(**slots[calls[0] % 2])
            calls[0] += 1

        timer = make_timer(device, **dict(timing_rule or {}))
        budget = job.get("time_budget_s")
        # The correctness trials already warmed the candidate up (and compiled its kernels).
        with phase("timed_candidate"):
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
            with phase("timed_checks"):
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
        cached = shape.get("reference_time")
        if isinstance(cached, Mapping) and cached.get("time_s"):
            # The worker's cached eager time for this shape (evaluator.reference_timings):
            # it depends on the shape and the worker's versions, not on the submission.
            reference_figures = {
                "reference_time_s": cached["time_s"],
                "reference_spread_s": cached.get("spread_s"),
                "reference_reps": cached.get("reps"),
                "reference_time_source": "cache",
                "eager_timed": "baseline",  # the cache keeps the baseline's times only
            }
        else:
            # After the candidate's last call: the eager PyTorch the speedup divides by.
            timed_reference, eager_timed, eager_note = build_eager(
                job, shape, build_reference, device
            )
            with phase("timed_reference"):
                try:
                    reference_timing = timer.measure(run_reference, budget_s=budget)
                except Exception as exc:  # the harness's own baseline failed: not the candidate's
                    if eager_timed != "baseline":
                        raise
                    eager_note = (
                        f"the eager baseline failed when timed ({message_of(exc)}): the "
                        "speedup over eager divides by the reference's time"
                    )
                    timed_reference, eager_timed = build_reference(), "reference"
                    reference_timing = timer.measure(run_reference, budget_s=budget)
            reference_figures = {
                "reference_time_s": reference_timing.median_s,
                "reference_spread_s": reference_timing.std_error_s,
                "reference_reps": reference_timing.reps,
                "reference_time_source": "measured",
                "eager_timed": eager_timed,
            }
            if eager_note:
                timing.warnings.append(eager_note)
    return {
        "status": "pass",
        "time_s": timing.median_s,
        "time_spread_s": timing.std_error_s,
        "reps": timing.reps,
        "host_time_s": timing.host_median_s,
        "counted_time_s": timing.counted_median_s,
        **reference_figures,
        "warnings": timing.warnings,
    }
