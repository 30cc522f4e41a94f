"""An owner cancels a submission that has not finished: queued, its run and shards are
cancelled before any worker takes them; running, the worker's next heartbeat finds its run
cancelled and stops the evaluator child (``shards.ShardHeartbeat`` raises ``RunTakenOver``,
the launcher kills the child's process group). The upload, the submission and its history
stay; a cancelled submission does not count against its owner's quota."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from evaluator.errors import UserError

from . import services
from .models import EvaluationRun, Shard, Submission

Status = Submission.Status
CANCELLABLE = (Status.RECEIVED, Status.QUEUED, Status.RUNNING)


class NotCancellable(UserError):
    """The submission is finished, being scored, or not the actor's (HTTP 409 / 403)."""

    code = "submission:not-cancellable"


class NotYours(UserError):
    code = "submission:not-yours"


def submission_can_cancel(*, submission: Submission, user) -> bool:
    """Whether ``user`` may cancel ``submission`` now (its owner or staff, unfinished)."""
    owner_or_staff = user.is_authenticated and (user.is_staff or user.pk == submission.owner_id)
    return owner_or_staff and submission.status in CANCELLABLE


def submission_cancel(*, submission: Submission, actor) -> Submission:
    """Cancel ``submission`` for ``actor`` (its owner, or staff); its latest run and that
    run's unfinished shards are cancelled in the same transaction. Raises ``NotYours`` or
    ``NotCancellable`` (already finished, or scoring) with what the actor can do instead."""
    if not (actor.is_staff or actor.pk == submission.owner_id):
        raise NotYours("Only the submission's owner or an admin can cancel it.")
    now = timezone.now()
    with transaction.atomic():
        run = (
            EvaluationRun.objects.select_for_update()
            .filter(submission=submission)
            .order_by("-attempt")
            .first()
        )
        submission.refresh_from_db(fields=["status"])
        status = submission.status
        if status not in CANCELLABLE:
            raise NotCancellable(
                f"Submission #{submission.pk} is {submission.get_status_display().lower()}: "
                "only a received, queued or running submission can be cancelled."
            )
        who = "an admin" if actor.pk != submission.owner_id else "its owner"
        moved = services.submission_transition(
            submission=submission,
            from_status=status,
            to_status=Status.CANCELLED,
            note=f"cancelled by {who} ({actor.get_username()})",
        )
        if not moved:  # a worker moved it at the same moment; say what it is now
            submission.refresh_from_db(fields=["status"])
            raise NotCancellable(
                f"Submission #{submission.pk} became {submission.status} meanwhile; "
                "try again if it is still unfinished."
            )
        if run is not None:
            open_runs = (EvaluationRun.Status.QUEUED, EvaluationRun.Status.RUNNING)
            EvaluationRun.objects.filter(pk=run.pk, status__in=open_runs).update(
                status=EvaluationRun.Status.CANCELLED, finished_at=now
            )
            Shard.objects.filter(
                run=run, status__in=(Shard.Status.QUEUED, Shard.Status.RUNNING)
            ).update(status=Shard.Status.CANCELLED, finished_at=now, error_message="cancelled")
    return submission
