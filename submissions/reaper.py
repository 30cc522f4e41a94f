"""The reaper: nothing is lost when a worker dies or the broker drops its messages.

The database is the source of truth. Run periodically (Celery beat sends
``submissions.reap_runs``; ``manage.py reap_runs`` runs it once), it

* declares lost each running run whose heartbeat is older than ``HEARTBEAT_STALE_S`` and
  queues a new attempt (``services.run_replace``), up to ``MAX_ATTEMPTS`` runs;
* sends again the id of each queued run that no worker took within ``QUEUED_GRACE_S``
  while it was not waiting behind an older running one (the broker lost the message; a
  duplicate message is harmless: the task does nothing for a run that is not queued),
  up to ``MAX_ATTEMPTS`` sends.

Past the cap the submission fails with a ``platform:*`` error, which is refunded from its
owner's quota (``submissions.quotas``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from . import services
from .models import EvaluationRun, Submission

logger = logging.getLogger(__name__)

RunStatus = EvaluationRun.Status


@dataclass
class ReapReport:
    """What one pass did (ids)."""

    requeued: list[int] = field(default_factory=list)  # lost runs replaced by a new attempt
    resent: list[int] = field(default_factory=list)  # queued runs whose message was re-sent
    failed: list[int] = field(default_factory=list)  # submissions failed at the cap

    def __str__(self) -> str:
        return (
            f"{len(self.requeued)} lost runs re-queued {self.requeued}, "
            f"{len(self.resent)} queued runs re-sent {self.resent}, "
            f"{len(self.failed)} submissions failed at the attempt cap {self.failed}"
        )


def _reap_stale(run: EvaluationRun, report: ReapReport) -> None:
    seen = run.heartbeat_at or run.started_at
    replacement = services.run_replace(
        run=run,
        reason=f"no heartbeat from worker {run.worker or '?'} since {seen:%Y-%m-%d %H:%M:%S} UTC",
    )
    if replacement is not None:
        report.requeued.append(run.pk)
        return
    run.refresh_from_db(fields=["status"])
    run.submission.refresh_from_db(fields=["status", "error_code"])
    if run.status == RunStatus.LOST and run.submission.error_code == services.WorkerLost.code:
        report.failed.append(run.submission_id)


def _waiting_in_line(run: EvaluationRun) -> bool:
    """A live run on the same queue that was queued before this one: the queue is busy,
    not broken, and this run waits its turn."""
    fresh = timezone.now() - timedelta(seconds=settings.ATREX["HEARTBEAT_STALE_S"])
    return EvaluationRun.objects.filter(
        queue=run.queue,
        status=RunStatus.RUNNING,
        heartbeat_at__gte=fresh,
        created_at__lte=run.created_at,
    ).exists()


def _resend_or_fail(run: EvaluationRun, report: ReapReport) -> None:
    cap = settings.ATREX["MAX_ATTEMPTS"]
    with transaction.atomic():
        if run.dispatch_count >= cap:
            failed = EvaluationRun.objects.filter(
                pk=run.pk, status=RunStatus.QUEUED, dispatch_count=run.dispatch_count
            ).update(
                status=RunStatus.FAILED,
                finished_at=timezone.now(),
                error_code=services.QueueLost.code,
                error_message=f"no worker took it after {run.dispatch_count} sends",
            )
            if not failed:
                return
            error = services.QueueLost(
                f"No worker took the evaluation after it was sent {run.dispatch_count} times "
                "(a failure on our side). This does not count against your quota; an admin "
                "has been told. Submit it again later."
            )
            logger.error("submission %s failed: queue %s lost it", run.submission_id, run.queue)
            if services.submission_transition(
                submission=run.submission,
                from_status=Submission.Status.QUEUED,
                to_status=Submission.Status.FAILED,
                error=error,
                note=error.code,
            ):
                report.failed.append(run.submission_id)
            return
        resent = EvaluationRun.objects.filter(
            pk=run.pk, status=RunStatus.QUEUED, dispatch_count=run.dispatch_count
        ).update(dispatch_count=F("dispatch_count") + 1, dispatched_at=timezone.now())
        if not resent:
            return
        logger.warning("run %s waited past its grace period: sent again", run.pk)
        transaction.on_commit(lambda: services.evaluation_run_dispatch(run=run))
        report.resent.append(run.pk)


def runs_reap() -> ReapReport:
    """One pass over running and queued runs (safe to run anywhere, any number of times)."""
    report = ReapReport()
    now = timezone.now()
    stale_cutoff = now - timedelta(seconds=settings.ATREX["HEARTBEAT_STALE_S"])
    stale = EvaluationRun.objects.filter(status=RunStatus.RUNNING).filter(
        Q(heartbeat_at__lt=stale_cutoff) | Q(heartbeat_at__isnull=True, started_at__lt=stale_cutoff)
    )
    for run in stale.select_related("submission").order_by("pk"):
        _reap_stale(run, report)
    grace_cutoff = now - timedelta(seconds=settings.ATREX["QUEUED_GRACE_S"])
    overdue = EvaluationRun.objects.filter(
        status=RunStatus.QUEUED, submission__status=Submission.Status.QUEUED
    ).filter(
        Q(dispatched_at__lt=grace_cutoff)
        | Q(dispatched_at__isnull=True, created_at__lt=grace_cutoff)
    )
    for run in overdue.select_related("submission").order_by("created_at", "pk"):
        if not _waiting_in_line(run):
            _resend_or_fail(run, report)
    if report.requeued or report.resent or report.failed:
        logger.warning("reaper: %s", report)
    return report
