"""Compare two or more submissions (or a submission and a baseline) of one suite version:
per operator their scores and the differences from the first, per shape their statuses,
times and the first's time over each other's (a speed-up), and which shapes changed status.
One selector serves the API (``/api/compare/``) and the ``atrex compare`` client."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser

from atrex_site.page_cache import shared_value
from submissions import querysets
from submissions.models import EvaluationRun, ShapeResult, Submission
from submissions.selectors import shape_results_visible_to, submission_latest_run


class ComparisonError(ValueError):
    """Submissions that cannot be compared (too few, different suites); says why."""


def _run(submission: Submission) -> EvaluationRun | None:
    return submission_latest_run(submission=submission)


def submissions_compare(*, submissions: list[Submission], user: Any) -> dict[str, Any]:
    """The comparison of ``submissions`` (first = the one the others are measured against),
    as ``user`` may see it (hidden shapes left out for everyone but staff)."""
    if len(submissions) < 2:
        raise ComparisonError("Name at least two submissions to compare.")
    suites = {submission.suite_version_id for submission in submissions}
    if len(suites) > 1:
        raise ComparisonError(
            "These submissions were measured on different suite versions; compare "
            "submissions of one suite version."
        )
    ids = [submission.pk for submission in submissions]
    runs = {submission.pk: _run(submission) for submission in submissions}
    operators: dict[str, dict[str, Any]] = {}
    shapes: dict[tuple[str, str], dict[int, ShapeResult]] = {}
    for pk, run in runs.items():
        if run is None:
            continue
        for result in run.operator_results.all():
            entry = operators.setdefault(
                result.operator,
                {"operator": result.operator, "importance": result.importance, "scores": {}},
            )
            entry["scores"][pk] = result.score
            entry.setdefault("status", {})[pk] = result.status
        for row in shape_results_visible_to(run=run, user=user):
            shapes.setdefault((row.operator, row.shape_id), {})[pk] = row
    first = ids[0]
    operator_rows = []
    for entry in sorted(operators.values(), key=lambda e: (-e["importance"], e["operator"])):
        base = entry["scores"].get(first)
        entry["delta"] = {
            pk: (score - base if base is not None and score is not None else None)
            for pk, score in entry["scores"].items()
            if pk != first
        }
        operator_rows.append(entry)
    shape_rows = []
    changed = 0
    for (operator, shape_id), by_pk in sorted(shapes.items()):
        statuses = {pk: row.status for pk, row in by_pk.items()}
        base_time = by_pk[first].time_ms if first in by_pk else None
        speedups = {
            pk: (base_time / row.time_ms if base_time and row.time_ms else None)
            for pk, row in by_pk.items()
            if pk != first
        }
        status_changed = len(set(statuses.values())) > 1 or len(statuses) < len(ids)
        changed += status_changed
        shape_rows.append(
            {
                "operator": operator,
                "shape_id": shape_id,
                "weight": next(iter(by_pk.values())).weight,
                "status": statuses,
                "time_ms": {pk: row.time_ms for pk, row in by_pk.items()},
                "roofline_fraction": {pk: row.roofline_fraction for pk, row in by_pk.items()},
                "speedup_over_first": speedups,
                "status_changed": status_changed,
            }
        )
    return {
        "submissions": [
            {
                "id": submission.pk,
                "title": submission.title,
                "owner": submission.owner.get_username(),
                "status": submission.status,
                "is_baseline": submission.is_baseline,
                "aggregate": (runs[submission.pk].results or {}).get("scores", {}).get("aggregate")
                if runs[submission.pk] is not None and runs[submission.pk].results
                else None,
            }
            for submission in submissions
        ],
        "suite": submissions[0].suite_version.slug,
        "operators": operator_rows,
        "shapes": shape_rows,
        "shapes_changed_status": changed,
    }


def comparison_shareable(*, submissions: list[Submission], user: Any) -> bool:
    """Whether the comparison of ``submissions`` is the same for ``user`` as for everyone:
    each submission public, not hidden and published (its results then change only with a
    new status, which bumps the board's generation), and the reader not staff (staff see
    hidden shapes)."""
    return not querysets.is_staff(user) and all(
        submission.visibility == querysets.PUBLIC
        and not submission.hidden
        and submission.status == Submission.Status.PUBLISHED
        for submission in submissions
    )


def submissions_compare_shared(*, submissions: list[Submission], user: Any) -> dict[str, Any]:
    """``submissions_compare``, computed once per board generation and shared by every
    reader where ``comparison_shareable``; otherwise computed for ``user`` alone. The
    caller checks first that ``user`` may see ``submissions``."""
    if not comparison_shareable(submissions=submissions, user=user):
        return submissions_compare(submissions=submissions, user=user)
    key = "compare:" + ",".join(str(submission.pk) for submission in submissions)
    return shared_value(
        key, lambda: submissions_compare(submissions=submissions, user=AnonymousUser())
    )
