"""The results document (schema ``atrex-results/1``): entries, sanitising, writing.

Pure stdlib. The child process measures; this module turns a measurement into the
shape entry of results.json (roofline fraction, speedup, fallback verdict) and writes
the document atomically.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evaluator import HARNESS_VERSION
from evaluator.figures import duration_ms, roofline_percent
from evaluator.hardware import HardwareProfile
from evaluator.roofline import roofline_fraction, t_sol_seconds
from evaluator.scoring import operator_verdict
from evaluator.suite import ShapeSpec
from evaluator.verdicts import STATUS_CODES, merge

SCHEMA = "atrex-results/1"
SHAPE_FIELDS = (
    "shape_id",
    "weight",
    "status",
    "codes",
    "time_ms",
    "time_spread_ms",
    "reps",
    "trials",
    "reference_time_ms",
    "reference_time_source",
    "eager_timed",
    "reference_cache",
    "t_sol_ms",
    "roofline_fraction",
    "speedup",
    "own_kernel_share",
    "watched_time_ms",
    "unwatched_speedup",
    "max_abs_error",
    "mismatch_share",
    "error",
    "w_flops",
    "q_read_bytes",
    "q_write_bytes",
    "wall_s",
    "reference_pool",
    "fallback_decided_on_first_call",
)


def finite_or_none(value: Any) -> float | None:
    """A finite float, or None (JSON has no NaN/Infinity)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def under_own_share_threshold(own_share: Any, threshold: float) -> bool:
    """Whether a correct shape with this own-kernel share is a ``fallback``: one test for
    the child (which does not time such a shape) and for :func:`shape_entry`."""
    share = finite_or_none(own_share)
    return share is not None and share < threshold


def _ms(seconds: Any) -> float | None:
    value = finite_or_none(seconds)
    return None if value is None else value * 1e3


def _describe_ops(top_ops: list[Mapping[str, Any]]) -> str:
    return (
        ", ".join(
            f"{op.get('op')} ({op.get('calls')} calls, {duration_ms(op.get('time_ms', 0))})"
            for op in top_ops[:5]
        )
        or "none recorded"
    )


IMPOSSIBLE_ROOFLINE_FRACTION = 1.0
"""A passing shape timed faster than its roofline bound (T_sol from the hardware profile's
peaks, the L2 flushed before each call) is refused. The highest honest figure measured on
the H200 is 0.89 (silu_and_mul, results/)."""
IMPOSSIBLE_CALL_S = 1e-6
"""So is one timed under a microsecond: the fastest honest call measured on the H200 took
3.5 us (launch included), and a Triton interpreter launch on the CPU takes milliseconds."""


def shape_entry(
    shape: ShapeSpec,
    *,
    status: str,
    error: str | None = None,
    measurement: Mapping[str, Any] | None = None,
    hardware: HardwareProfile,
    threshold_own_share: float,
    codes: list[str] | None = None,
) -> dict[str, Any]:
    """One entry of an operator's "shapes" list.

    ``measurement`` is the child's record (times in seconds, own-kernel share, top ops,
    max abs error, verdict codes). A correct shape whose own-kernel share is under the
    threshold becomes ``fallback``, and its error names the PyTorch ops that did the work
    (and, where its first correctness call launched none of the submission's own kernels,
    that this decided it: ``fallback_decided_on_first_call``); so does one whose timed
    calls ran far faster than its watched calls (``unwatched_error``, code
    ``unwatched_path``). A pass timed faster than the roofline
    or than a launch fails with ``above_roofline`` or ``impossible_time``. ``codes`` (and
    the record's) are the shape's verdict codes (``evaluator.verdicts``); a failing shape
    without one gets its status's.
    """
    measured = dict(measurement or {})
    found = merge(codes, measured.get("codes"))
    t_sol_s = t_sol_seconds(
        w_flops=shape.w_flops, q_read=shape.q_read, q_write=shape.q_write, hardware=hardware
    )
    time_s = finite_or_none(measured.get("time_s"))
    reference_s = finite_or_none(measured.get("reference_time_s"))
    own_share = finite_or_none(measured.get("own_kernel_share"))
    if status == "pass" and under_own_share_threshold(own_share, threshold_own_share):
        status = "fallback"
        error = (
            f"shape {shape.shape_id}: only {own_share:.0%} of the call is the submission's "
            f"own kernels (threshold {threshold_own_share:.0%}); the rest: "
            f"{_describe_ops(measured.get('top_ops') or [])}"
        )
        if measured.get("fallback_decided_on_first_call"):
            error += (
                "; decided on its first correctness call, which launched none of the "
                "submission's own kernels (the other correctness calls were checked but not "
                "watched)"
            )
        if measured.get("not_timed"):
            error += " (not timed: a fallback scores 0 whatever its speed)"
        found = merge(found, ["fallback"])
    elif status == "pass" and measured.get("unwatched_error"):
        # Its timed calls ran far faster than its watched ones (evaluator.measure): the share
        # was measured on another path than the one timed.
        status, error = "fallback", str(measured["unwatched_error"])
        found = merge(found, ["unwatched_path"])
    fraction = speedup = None
    if time_s and time_s > 0:
        fraction = roofline_fraction(t_sol_s=t_sol_s, t_measured_s=time_s)
        speedup = reference_s / time_s if reference_s else None
    if status == "pass" and time_s is not None and fraction is not None:
        # Faster than the hardware's bound, or than any launched kernel: not a kernel's
        # time but a broken or forged measurement. Never scored; the error says so.
        if fraction > IMPOSSIBLE_ROOFLINE_FRACTION:
            bound = (
                f"{roofline_percent(fraction)} of the roofline: faster than the hardware's "
                f"roofline bound ({duration_ms(t_sol_s * 1e3)})"
            )
            found = merge(found, ["above_roofline"])
        elif time_s < IMPOSSIBLE_CALL_S:
            bound = (
                f"under {duration_ms(IMPOSSIBLE_CALL_S * 1e3)}, less than launching a kernel takes"
            )
            found = merge(found, ["impossible_time"])
        else:
            bound = None
        if bound:
            status, fraction, speedup = "runtime_error", None, None
            error = (
                f"shape {shape.shape_id}: the measured time ({duration_ms(time_s * 1e3)}) is "
                f"{bound}: no kernel can be that fast, so the timing is not trusted; held "
                "for review"
            )
    if status != "pass" and not found:
        found = [STATUS_CODES[status]] if status in STATUS_CODES else []
    return {
        "shape_id": shape.shape_id,
        "weight": shape.weight,
        "status": status,
        "codes": found,
        "time_ms": _ms(time_s),
        "time_spread_ms": _ms(measured.get("time_spread_s")),
        "reps": measured.get("reps"),
        # The correctness trials it ran (fewer in an agent's round: environment.measurement).
        "trials": measured.get("trials"),
        "reference_time_ms": _ms(reference_s),
        "reference_time_source": (
            str(measured.get("reference_time_source") or "measured") if reference_s else None
        ),
        "eager_timed": (str(measured.get("eager_timed") or "reference") if reference_s else None),
        "reference_cache": _cache_use(measured.get("reference_cache")),
        "t_sol_ms": t_sol_s * 1e3,
        "roofline_fraction": finite_or_none(fraction),
        "speedup": finite_or_none(speedup),
        "own_kernel_share": own_share,
        "watched_time_ms": _ms(measured.get("watched_time_s")),
        "unwatched_speedup": finite_or_none(measured.get("unwatched_speedup")),
        "max_abs_error": finite_or_none(measured.get("max_abs_error")),
        "mismatch_share": finite_or_none(measured.get("mismatch_share")),
        "error": error if error is not None else measured.get("error"),
        "w_flops": dict(shape.w_flops),
        "q_read_bytes": shape.q_read,
        "q_write_bytes": shape.q_write,
        "wall_s": _wall(measured.get("wall_s")),
        "reference_pool": _pool_use(measured.get("reference_pool")),
        "fallback_decided_on_first_call": bool(measured.get("fallback_decided_on_first_call")),
        **_watch_confirmed(measured.get("watch_confirmed")),
        **_second_look(measured.get("second_look")),
        **_alone_after(measured.get("alone_after")),
    }


def _alone_after(record: Any) -> dict[str, Any]:
    """``{"alone_after": {"error": ...}}`` for a shape of a concurrent run that ran out of
    device memory beside other children and was evaluated again alone
    (``evaluator.measure.evaluate_shape``): the first attempt's error; nothing otherwise."""
    if not isinstance(record, Mapping):
        return {}
    return {"alone_after": {"error": str(record.get("error") or "")[:2000]}}


def _second_look(record: Any) -> dict[str, Any]:
    """``{"second_look": ...}`` for a CPU shape whose own-kernel share fell just under the
    threshold and was checked and watched again (``evaluator.measure.second_look_due``):
    the first look's share, the second's (the shape's ``own_kernel_share``, which decided)
    and the second look's watched calls; nothing otherwise (the key is absent)."""
    if not isinstance(record, Mapping):
        return {}
    calls = record.get("calls")
    return {
        "second_look": {
            "first_own_kernel_share": finite_or_none(record.get("first_own_kernel_share")),
            "own_kernel_share": finite_or_none(record.get("own_kernel_share")),
            "calls": calls if isinstance(calls, int) and not isinstance(calls, bool) else None,
        }
    }


def _watch_confirmed(record: Any) -> dict[str, Any]:
    """``{"watch_confirmed": ...}`` for a shape whose watched figure was measured again,
    alone, in a concurrent run (``evaluator.concurrency``): the figure taken beside other
    children and the one taken alone (ms), the second watch's own-kernel share and whether
    the watched-against-timed check still fired; nothing otherwise (the key is absent)."""
    if not isinstance(record, Mapping):
        return {}
    return {
        "watch_confirmed": {
            "shared_watched_time_ms": _ms(record.get("shared_watched_time_s")),
            "watched_time_ms": _ms(record.get("watched_time_s")),
            "own_kernel_share": finite_or_none(record.get("own_kernel_share")),
            "confirmed": bool(record.get("confirmed")),
        }
    }


def _pool_use(record: Any) -> dict[str, Any] | None:
    """How the shape's correctness trials used the reference pool (``evaluator.
    reference_pool``): trials ``planned`` from it, ``pooled`` (the stored output compared),
    ``recomputed`` (why an entry was not used); None when the pool was off for the shape."""
    if not isinstance(record, Mapping):
        return None
    return {
        "planned": int(record.get("planned") or 0),
        "pooled": int(record.get("pooled") or 0),
        "recomputed": [str(reason) for reason in record.get("recomputed") or []],
    }


def _cache_use(record: Any) -> dict[str, Any] | None:
    """How the shape's eager reference time used the worker's timings cache
    (``evaluator.reference_timings``): ``hit``, and on a hit the figure's ``age_s`` (since its
    newest measurement), ``uses`` (since then, this one included) and ``measurements``
    (how many its median is of); on a miss ``why`` (``new``, ``uses``, ``age``,
    ``refresh``). None when the cache was off for the shape."""
    if not isinstance(record, Mapping):
        return None
    if record.get("hit"):
        return {
            "hit": True,
            "age_s": finite_or_none(record.get("age_s")),
            "uses": int(record.get("uses") or 0),
            "measurements": int(record.get("measurements") or 0),
        }
    return {"hit": False, "why": str(record.get("why") or "")}


def _wall(phases: Any) -> dict[str, float] | None:
    """The child's per-phase seconds of the harness's own work on a shape (checks, timing,
    total), kept only when they are finite numbers."""
    if not isinstance(phases, Mapping):
        return None
    kept = {str(k): finite_or_none(v) for k, v in phases.items() if isinstance(v, (int, float))}
    return {k: v for k, v in kept.items() if v is not None} or None


def operator_entry(
    *,
    operator: str,
    importance: float,
    status: str,
    error: str | None,
    score: float,
    warnings: list[str],
    shapes: list[dict[str, Any]],
    variants: list[dict[str, Any]] | None = None,
    wall_s: float | None = None,
    phases_s: Mapping[str, float] | None = None,
    ahead_s: float | None = None,
    compile_ahead: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One entry of the "operators" list (``variants``: the validation variants' name,
    status and error; empty when none ran; ``wall_s``: the operator's turn, from its child
    getting the job to the child's exit, what was left of its start-up included;
    ``phases_s``: how that time divides, see ``evaluator.runner.ChildOutcome.phases``;
    ``ahead_s``: how long the child had been starting before its turn, beside the previous
    operator's child; ``compile_ahead``, in a campaign's round only: what its child
    compiled before its first shape, ``evaluator.compile_ahead``). The per-operator verdict
    and its counts (``verdict``, ``apparent_passes``, ``real_passes``, ``wrong_shapes``,
    ``hold_codes``) come from ``evaluator.scoring.operator_verdict`` over ``shapes``."""
    verdict = operator_verdict(shapes)
    return {
        "operator": operator,
        "importance": importance,
        "status": status,
        "error": error,
        "score": score,
        "verdict": verdict["verdict"],
        "apparent_passes": verdict["apparent_passes"],
        "real_passes": verdict["real_passes"],
        "wrong_shapes": verdict["wrong_shapes"],
        "hold_codes": verdict["hold_codes"],
        "warnings": list(warnings),
        "shapes": shapes,
        "variants": [
            {
                "name": v.get("name"),
                "status": v.get("status"),
                "error": v.get("error"),
                "codes": list(v.get("codes") or []),
            }
            for v in variants or ()
        ],
        "wall_s": finite_or_none(wall_s),
        "phases_s": _wall(phases_s) or {},
        "ahead_s": finite_or_none(ahead_s),
        **({"compile_ahead": dict(compile_ahead)} if compile_ahead else {}),
    }


def results_document(
    *,
    suite: Mapping[str, Any],
    hardware: Mapping[str, Any],
    environment: Mapping[str, Any],
    seed_digest: str,
    started_at: str,
    finished_at: str,
    wall_s: float,
    error: Mapping[str, str] | None,
    bundle: Mapping[str, Any] | None,
    operators: list[dict[str, Any]],
    scores: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The whole results.json document, fields in the documented order."""
    return {
        "schema": SCHEMA,
        "harness_version": HARNESS_VERSION,
        "suite": dict(suite),
        "hardware": dict(hardware),
        "environment": dict(environment),
        "seed_digest": seed_digest,
        "started_at": started_at,
        "finished_at": finished_at,
        "wall_s": wall_s,
        "error": dict(error) if error else None,
        "bundle": dict(bundle) if bundle is not None else None,
        "operators": operators,
        "scores": dict(scores) if scores is not None else None,
    }


def sanitize(value: Any) -> Any:
    """A copy with every non-finite float replaced by None (strict JSON)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): sanitize(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [sanitize(v) for v in value]
    return value


def write_results(path: str | os.PathLike[str], document: Mapping[str, Any]) -> None:
    """Write the document as strict JSON, atomically (a reader never sees half a file)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(sanitize(document), indent=2, allow_nan=False) + "\n"
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
