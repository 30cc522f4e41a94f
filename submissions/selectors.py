"""Reads for submissions, with visibility applied in one place."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from .models import EvaluationRun, Submission


def submissions_visible_to(*, user) -> QuerySet[Submission]:
    """Public submissions, plus the user's own; staff see everything.

    A submission an admin hid is seen by its owner and staff only.
    """
    queryset = Submission.objects.select_related("owner", "suite_version", "hardware")
    if user.is_authenticated and user.is_staff:
        return queryset
    public = Q(visibility=Submission.Visibility.PUBLIC, hidden=False)
    if user.is_authenticated:
        return queryset.filter(public | Q(owner=user))
    return queryset.filter(public)


def submission_can_see_files(*, submission: Submission, user) -> bool:
    """The upload itself and the logs: owner and staff only."""
    return user.is_authenticated and (user.is_staff or submission.owner_id == user.pk)


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
