"""Reads for submissions, with visibility applied in one place."""

from __future__ import annotations

from django.db.models import QuerySet

from . import querysets
from .models import EvaluationRun, Submission


def submissions_visible_to(*, user) -> QuerySet[Submission]:
    """Public submissions, plus the user's own; staff see everything (the rule is
    ``querysets.visible_q``). A submission an admin hid is seen by its owner and staff only.
    """
    return Submission.objects.visible_to(user).select_related("owner", "suite_version", "hardware")


def submission_can_see_files(*, submission: Submission, user) -> bool:
    """The upload itself and the logs: owner and staff only."""
    return querysets.can_see_files(user=user, submission=submission)


def submission_latest_run(*, submission: Submission) -> EvaluationRun | None:
    return submission.runs.order_by("-attempt").first()


def submission_progress(*, submission: Submission) -> dict:
    """What the live status box shows: status, progress of the latest run, the error."""
    run = submission_latest_run(submission=submission)
    done = run.shapes_done if run else 0
    total = run.shapes_total if run else 0
    return {
        "id": submission.pk,
        "status": submission.status,
        "status_display": submission.get_status_display(),
        "final": submission.is_final,
        "shapes_done": done,
        "shapes_total": total,
        "percent": round(100.0 * done / total, 1) if total else 0.0,
        "error_code": submission.error_code,
        "error_message": submission.error_message,
    }
