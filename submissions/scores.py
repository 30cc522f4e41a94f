"""Publishing a run's scores on the board, and the speedup over the torch.compile baseline.

The board (``leaderboard``) reads these rows; it learns of changes that send no model
signal (bulk updates) through ``scores_changed``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from django.dispatch import Signal
from django.utils import timezone

from .models import Score, ShapeResult, Submission

scores_changed = Signal()
"""Sent (sender=Score) after published scores change without a post_save (bulk updates)."""


COMPILE_BASELINE = "torch.compile"
"""``Submission.manifest["baseline"]`` of the torch.compile baseline rows."""


IDIOMATIC_BASELINE = "idiomatic"
"""``Submission.manifest["baseline"]`` of the idiomatic eager baseline rows
(``evaluator/baselines``, ``bench/reference_baseline.py --mode baseline``)."""


def compile_baseline_times(*, suite_version_id: int, hardware_id: int) -> dict[tuple, float]:
    """(operator, shape id) -> median ms of the latest published torch.compile baseline of
    a suite version and hardware; empty when there is none."""
    return baseline_times(
        kind=COMPILE_BASELINE, suite_version_id=suite_version_id, hardware_id=hardware_id
    )


def baseline_times(*, kind: str, suite_version_id: int, hardware_id: int) -> dict[tuple, float]:
    """(operator, shape id) -> median ms of the latest published baseline row of ``kind``
    (``Submission.manifest["baseline"]``) of a suite version and hardware; empty when
    there is none."""
    baseline = (
        Score.objects.filter(
            suite_version_id=suite_version_id,
            hardware_id=hardware_id,
            submission__is_baseline=True,
            submission__hidden=False,
            submission__status=Submission.Status.PUBLISHED,
            submission__manifest__baseline=kind,
        )
        .order_by("-published_at")
        .values_list("run_id", flat=True)
        .first()
    )
    if baseline is None:
        return {}
    rows = ShapeResult.objects.filter(run_id=baseline, time_ms__gt=0).values_list(
        "operator", "shape_id", "time_ms"
    )
    return {(operator, shape_id): time_ms for operator, shape_id, time_ms in rows}


def geomean_speedup_over(*, run_id: int, baseline_times: Mapping[tuple, float]) -> float | None:
    """Geometric mean of baseline time / this run's time over the run's passing shapes
    that the baseline also timed; None when there is no such shape."""
    logs = [
        math.log(baseline_times[(operator, shape_id)] / time_ms)
        for operator, shape_id, time_ms in ShapeResult.objects.filter(
            run_id=run_id, status="pass", time_ms__gt=0
        ).values_list("operator", "shape_id", "time_ms")
        if (operator, shape_id) in baseline_times
    ]
    return math.exp(sum(logs) / len(logs)) if logs else None


def geomean_speedups(
    *, base_times: Mapping[tuple, float], times: Mapping[tuple, float]
) -> dict[str, tuple[float, int]]:
    """Operator -> (geometric mean of base time / time, shapes counted) over the
    (operator, shape id) keys both map to a positive time; operators with no such shape are
    left out. Pure: the callers choose which shapes' times count."""
    logs: dict[str, list[float]] = {}
    for key, time_ms in times.items():
        base = base_times.get(key)
        if base and time_ms and base > 0 and time_ms > 0:
            logs.setdefault(key[0], []).append(math.log(base / time_ms))
    return {op: (math.exp(sum(v) / len(v)), len(v)) for op, v in logs.items()}


def scores_refresh_compile_speedup(*, suite_version_id: int, hardware_id: int) -> int:
    """Recompute every stored speedup over torch.compile of a board (after its compile
    baseline is published); returns how many rows changed."""
    times = compile_baseline_times(suite_version_id=suite_version_id, hardware_id=hardware_id)
    changed = 0
    for score in Score.objects.filter(suite_version_id=suite_version_id, hardware_id=hardware_id):
        value = geomean_speedup_over(run_id=score.run_id, baseline_times=times) if times else None
        if value != score.geomean_speedup_compile:
            Score.objects.filter(pk=score.pk).update(geomean_speedup_compile=value)
            changed += 1
    if changed:
        # update() sends no post_save; the pages showing these boards must still hear of it.
        scores_changed.send(sender=Score)
    return changed


def score_publish(
    *,
    run,
    scores: dict,
    operator_scores: dict[str, float],
    operator_verdicts: dict[str, str] | None = None,
) -> Score:
    """Store a run's headline figures on the board (replacing the submission's old row);
    its per-shape results are stored already (the speedup over torch.compile joins them
    with the compile baseline's). ``operator_verdicts``: slug -> per-operator verdict
    (``evaluator.scoring.operator_verdict``); the pass counts come from ``scores``
    (``evaluator.scoring.summarize``; None for a block written before they existed)."""
    submission = run.submission
    compile_times = compile_baseline_times(
        suite_version_id=submission.suite_version_id, hardware_id=submission.hardware_id
    )
    ci = scores.get("aggregate_ci") or [None, None]
    score, _ = Score.objects.update_or_create(
        submission=submission,
        defaults={
            "run": run,
            "suite_version_id": submission.suite_version_id,
            "hardware_id": submission.hardware_id,
            "aggregate": scores["aggregate"],
            "aggregate_ci_low": ci[0],
            "aggregate_ci_high": ci[1],
            "apparent_pass_rate": scores["apparent_pass_rate"],
            "real_pass_rate": scores["real_pass_rate"],
            "fallback_rate": scores["fallback_rate"],
            "geomean_speedup_eager": scores.get("geomean_speedup_eager"),
            "geomean_speedup_compile": (
                geomean_speedup_over(run_id=run.pk, baseline_times=compile_times)
                if compile_times
                else None
            ),
            "operator_scores": operator_scores,
            "operator_verdicts": dict(operator_verdicts or {}),
            "shapes_total": scores.get("shapes_total"),
            "shapes_passed_apparent": scores.get("shapes_passed"),
            "shapes_passed_real": scores.get("shapes_passed_real"),
            "published_at": timezone.now(),
        },
    )
    return score
