"""Compare two or more submissions (or a submission and a baseline) of one suite version on
one hardware profile: per operator their scores, the differences from the first and the
speed-up over the first; per shape their statuses, times and the first's time over each
other's, and which shapes changed status.

One computation serves the page (``/compare/``), the API (``/api/compare/``) and the
``atrex compare`` client: ``comparison_ids_parse`` reads the ids, ``comparison_submissions``
applies who may see what, ``submissions_compare`` computes. Every refusal is a
``ComparisonError`` whose message says what to change.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

from django.contrib.auth.models import AnonymousUser

from atrex_site.page_cache import shared_value
from submissions import querysets
from submissions.models import EvaluationRun, OperatorResult, ShapeResult, Submission
from submissions.scores import geomean_speedups
from submissions.selectors import (
    shape_results_of_runs_visible_to,
    submission_latest_run,
    submission_results_withheld,
    submissions_visible_to,
)

MAX_COMPARED = 8
"""More columns than this make neither the tables nor the chart readable."""

# Statuses whose time is the time of a correct answer (a fallback is correct, only not the
# submission's own kernel): the operator speed-ups count these shapes only.
CORRECT_STATUSES = frozenset({"pass", "fallback"})


class ComparisonError(ValueError):
    """Submissions that cannot be compared; the message says what to change. ``code`` is
    the API's stable error code, ``status`` its HTTP status."""

    def __init__(self, message: str, *, code: str = "compare:not-comparable", status: int = 400):
        super().__init__(message)
        self.code = code
        self.status = status


def comparison_ids_parse(values: Iterable[str]) -> list[int]:
    """Submission ids from form or query values (``"12,15"``, ``"12 15"``, ``"#12"``, or one
    value per checkbox), in order, each once."""
    ids: list[int] = []
    for value in values:
        for part in re.split(r"[\s,;]+", value.strip()):
            if not part:
                continue
            text = part.removeprefix("#")
            if not re.fullmatch(r"[0-9]{1,9}", text):
                raise ComparisonError(
                    f"“{part}” is not a submission id: give numbers separated by commas, "
                    "e.g. 12, 15.",
                    code="compare:bad-ids",
                )
            if int(text) not in ids:
                ids.append(int(text))
    return ids


def comparison_submissions(*, ids: list[int], user: Any) -> list[Submission]:
    """The submissions ``ids`` names, in that order, if ``user`` may compare them: their
    own, or published ones they may see (staff: any). Raises ``ComparisonError``."""
    if len(ids) < 2:
        named = f" #{ids[0]} and" if ids else ""
        raise ComparisonError(
            f"Pick at least two submissions to compare:{named} one more (tick rows on the "
            "board, or add an id).",
            code="compare:too-few",
        )
    if len(ids) > MAX_COMPARED:
        raise ComparisonError(
            f"Compare at most {MAX_COMPARED} submissions at once; {len(ids)} were named.",
            code="compare:too-many",
        )
    visible = submissions_visible_to(user=user).in_bulk(ids)
    for pk in ids:
        if pk not in visible:
            raise ComparisonError(
                f"There is no submission #{pk} that you can see (it does not exist or is "
                "private). Check the id; you can compare public submissions and your own.",
                code="compare:unknown",
                status=404,
            )
    for pk in ids:
        submission = visible[pk]
        if submission_results_withheld(submission=submission, user=user):
            raise ComparisonError(
                f"Submission #{pk} is held for review: nothing of it is published until an "
                "admin releases it, so it cannot be compared (its owner and the admins can). "
                "Remove it, or compare it after its release.",
                code="compare:held",
            )
        own = user is not None and user.is_authenticated and submission.owner_id == user.pk
        if submission.status != Submission.Status.PUBLISHED and not (
            own or querysets.is_staff(user)
        ):
            raise ComparisonError(
                f"Submission #{pk} is not published ({submission.get_status_display().lower()}"
                "): only published submissions, and your own, can be compared.",
                code="compare:not-published",
            )
    return [visible[pk] for pk in ids]


def _shape_order(item: tuple[tuple[str, str], Any]) -> tuple:
    """Operators A to Z, their shapes in id order (2 before 10; ``smoke-0`` as text)."""
    operator, shape_id = item[0]
    numeric = shape_id.isascii() and shape_id.isdigit()
    return (operator, not numeric, int(shape_id) if numeric else 0, shape_id)


def _speedup_overall(by_operator: dict[str, tuple[float, int]]) -> float | None:
    counted = sum(n for _, n in by_operator.values())
    if not counted:
        return None
    return math.exp(sum(n * math.log(ratio) for ratio, n in by_operator.values()) / counted)


def submissions_compare(*, submissions: list[Submission], user: Any) -> dict[str, Any]:
    """The comparison of ``submissions`` (first = the one the others are measured against),
    as ``user`` may see it (hidden shapes left out for everyone but staff)."""
    if len(submissions) < 2:
        raise ComparisonError("Pick at least two submissions to compare.", code="compare:too-few")
    first_submission = submissions[0]
    for other in submissions[1:]:
        if other.suite_version_id != first_submission.suite_version_id:
            raise ComparisonError(
                f"#{other.pk} was measured on {other.suite_version.slug}, #{first_submission.pk}"
                f" on {first_submission.suite_version.slug}: compare submissions of one suite "
                "version (remove one of these).",
                code="compare:not-comparable",
            )
        if other.hardware_id != first_submission.hardware_id:
            raise ComparisonError(
                f"#{other.pk} ran on {other.hardware.name}, #{first_submission.pk} on "
                f"{first_submission.hardware.name}: times and roofline fractions of different "
                "hardware do not compare; pick submissions of one hardware profile.",
                code="compare:not-comparable",
            )
    ids = [submission.pk for submission in submissions]
    runs: dict[int, EvaluationRun | None] = {
        submission.pk: submission_latest_run(submission=submission) for submission in submissions
    }
    operators: dict[str, dict[str, Any]] = {}
    shapes: dict[tuple[str, str], dict[int, ShapeResult]] = {}
    correct_times: dict[int, dict[tuple[str, str], float]] = {pk: {} for pk in ids}
    # Every run's operator rows in one query, and their shape rows in another (the suite's
    # hidden shapes looked up once for all of them: they share the suite version).
    found_runs = [run for run in runs.values() if run is not None]
    submission_of = {run.pk: run.submission_id for run in found_runs}
    results_of: dict[int, list[OperatorResult]] = {pk: [] for pk in ids}
    for result in OperatorResult.objects.filter(run_id__in=list(submission_of)):
        results_of[submission_of[result.run_id]].append(result)
    for submission in submissions:
        if not results_of[submission.pk]:
            raise ComparisonError(
                f"Submission #{submission.pk} has no results to compare "
                f"({submission.get_status_display().lower()}); pick one that was evaluated.",
                code="compare:no-results",
            )
    for pk in ids:
        for result in results_of[pk]:
            entry = operators.setdefault(
                result.operator,
                {"operator": result.operator, "importance": result.importance, "scores": {}},
            )
            entry["scores"][pk] = result.score
            entry.setdefault("status", {})[pk] = result.status
    rows_of: dict[int, list[ShapeResult]] = {pk: [] for pk in ids}
    for row in shape_results_of_runs_visible_to(
        runs=found_runs, suite_version_id=first_submission.suite_version_id, user=user
    ).order_by("operator", "pk"):
        rows_of[submission_of[row.run_id]].append(row)
    for pk in ids:  # in the order named (each shape's columns follow it)
        for row in rows_of[pk]:
            shapes.setdefault((row.operator, row.shape_id), {})[pk] = row
            if row.status in CORRECT_STATUSES and row.time_ms:
                correct_times[pk][(row.operator, row.shape_id)] = row.time_ms
    first = ids[0]
    speedups = {
        pk: geomean_speedups(base_times=correct_times[first], times=correct_times[pk])
        for pk in ids[1:]
    }
    operator_rows = []
    for entry in sorted(operators.values(), key=lambda e: (-e["importance"], e["operator"])):
        base = entry["scores"].get(first)
        entry["delta"] = {
            pk: (score - base if base is not None and score is not None else None)
            for pk, score in entry["scores"].items()
            if pk != first
        }
        entry["speedup_over_first"] = {
            pk: speedups[pk][entry["operator"]][0] if entry["operator"] in speedups[pk] else None
            for pk in ids[1:]
        }
        entry["speedup_shapes"] = {
            pk: speedups[pk].get(entry["operator"], (None, 0))[1] for pk in ids[1:]
        }
        operator_rows.append(entry)
    shape_rows = []
    changed = 0
    for (operator, shape_id), by_pk in sorted(shapes.items(), key=_shape_order):
        statuses = {pk: row.status for pk, row in by_pk.items()}
        base_time = by_pk[first].time_ms if first in by_pk else None
        shape_speedups = {
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
                "speedup_over_first": shape_speedups,
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
                "speedup_over_first": _speedup_overall(speedups[submission.pk])
                if submission.pk != first
                else None,
            }
            for submission in submissions
        ],
        "suite": first_submission.suite_version.slug,
        "hardware": first_submission.hardware.slug,
        "operators": operator_rows,
        "shapes": shape_rows,
        "shapes_changed_status": changed,
    }


def comparison_for(*, ids: list[int], user: Any) -> dict[str, Any]:
    """The comparison of the submissions ``ids`` names, as ``user`` may see it: what the
    page, the API and the client show (computed once per board generation and shared where
    ``comparison_shareable``). Raises ``ComparisonError``."""
    return submissions_compare_shared(
        submissions=comparison_submissions(ids=ids, user=user), user=user
    )


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
