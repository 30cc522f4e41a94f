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

A run split into shards (``submissions.shards``) is watched shard by shard: a stale shard
is declared lost and tried again alone (``shards.shard_retry``), a queued shard whose
message was lost is sent again; the run's other shards are left alone. Past the cap of
tries of one shard (or sends of its message) the submission fails the same way.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from . import services, shards
from .models import EvaluationRun, Shard, Submission

logger = logging.getLogger(__name__)

RunStatus = EvaluationRun.Status


@dataclass
class ReapReport:
    """What one pass did (ids)."""

    requeued: list[int] = field(default_factory=list)  # lost runs replaced by a new attempt
    resent: list[int] = field(default_factory=list)  # queued runs whose message was re-sent
    failed: list[int] = field(default_factory=list)  # submissions failed at the cap
    shards_requeued: list[int] = field(default_factory=list)  # lost shards tried again
    shards_resent: list[int] = field(default_factory=list)  # queued shards re-sent

    def __str__(self) -> str:
        return (
            f"{len(self.requeued)} lost runs re-queued {self.requeued}, "
            f"{len(self.resent)} queued runs re-sent {self.resent}, "
            f"{len(self.shards_requeued)} lost shards re-queued {self.shards_requeued}, "
            f"{len(self.shards_resent)} queued shards re-sent {self.shards_resent}, "
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
    return (
        EvaluationRun.objects.filter(
            queue=run.queue,
            status=RunStatus.RUNNING,
            heartbeat_at__gte=fresh,
            created_at__lte=run.created_at,
        )
        .exclude(pk=run.pk)
        .exists()
    )


def _shard_failed_submission(shard: Shard, report: ReapReport) -> None:
    run = EvaluationRun.objects.select_related("submission").get(pk=shard.run_id)
    if run.status == RunStatus.FAILED and run.submission.status == Submission.Status.FAILED:
        report.failed.append(run.submission_id)


def _reap_stale_shard(shard: Shard, report: ReapReport) -> None:
    seen = shard.heartbeat_at or shard.started_at
    replacement = shards.shard_retry(
        shard=shard,
        from_status=Shard.Status.RUNNING,
        to_status=Shard.Status.LOST,
        error=services.WorkerLost(""),
        reason=f"no heartbeat from worker {shard.worker or '?'} since {seen:%Y-%m-%d %H:%M:%S} UTC",
        heartbeat_at=shard.heartbeat_at,
    )
    if replacement is not None:
        report.shards_requeued.append(shard.pk)
    else:
        _shard_failed_submission(shard, report)


def _resend_or_fail_shard(shard: Shard, report: ReapReport) -> None:
    if shard.dispatch_count >= settings.ATREX["MAX_ATTEMPTS"]:
        error = services.QueueLost(
            f"No worker took part {shard.index + 1} of the evaluation after it was sent "
            f"{shard.dispatch_count} times (a failure on our side). This does not count "
            "against your quota; an admin has been told. Submit it again later."
        )
        with transaction.atomic():
            run = EvaluationRun.objects.select_for_update().get(pk=shard.run_id)
            lost = Shard.objects.filter(
                pk=shard.pk, status=Shard.Status.QUEUED, dispatch_count=shard.dispatch_count
            ).update(status=Shard.Status.LOST, finished_at=timezone.now(), error_code=error.code)
            if lost and shards.run_fail(run=run, error=error):
                logger.error("submission %s failed: queue %s lost a shard", run.submission_id,
                             run.queue)  # fmt: skip
                report.failed.append(run.submission_id)
        return
    with transaction.atomic():
        resent = Shard.objects.filter(
            pk=shard.pk, status=Shard.Status.QUEUED, dispatch_count=shard.dispatch_count
        ).update(dispatch_count=F("dispatch_count") + 1, dispatched_at=timezone.now())
        if not resent:
            return
        logger.warning("shard %s waited past its grace period: sent again", shard.pk)
        transaction.on_commit(lambda: shards.shard_dispatch(shard=shard))
        report.shards_resent.append(shard.pk)


def _reap_shards(report: ReapReport, *, stale_cutoff, grace_cutoff) -> None:
    live_runs = (RunStatus.QUEUED, RunStatus.RUNNING)
    stale = Shard.objects.filter(status=Shard.Status.RUNNING, run__status__in=live_runs).filter(
        Q(heartbeat_at__lt=stale_cutoff) | Q(heartbeat_at__isnull=True, started_at__lt=stale_cutoff)
    )
    for shard in stale.order_by("pk"):
        _reap_stale_shard(shard, report)
    overdue = Shard.objects.filter(status=Shard.Status.QUEUED, run__status__in=live_runs).filter(
        Q(dispatched_at__lt=grace_cutoff)
        | Q(dispatched_at__isnull=True, created_at__lt=grace_cutoff)
    )
    for shard in overdue.select_related("run").order_by("created_at", "pk"):
        # A busy queue (a live run or another run's shard ahead of it) is not a broken one.
        fresh = timezone.now() - timedelta(seconds=settings.ATREX["HEARTBEAT_STALE_S"])
        busy = (
            Shard.objects.filter(
                run__queue=shard.run.queue,
                status=Shard.Status.RUNNING,
                heartbeat_at__gte=fresh,
                created_at__lte=shard.created_at,
            )
            .exclude(run=shard.run_id)
            .exists()
        )
        if not busy and not _waiting_in_line(shard.run):
            _resend_or_fail_shard(shard, report)


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
    stale = EvaluationRun.objects.filter(status=RunStatus.RUNNING, shard_count=0).filter(
        Q(heartbeat_at__lt=stale_cutoff) | Q(heartbeat_at__isnull=True, started_at__lt=stale_cutoff)
    )
    for run in stale.select_related("submission").order_by("pk"):
        _reap_stale(run, report)
    grace_cutoff = now - timedelta(seconds=settings.ATREX["QUEUED_GRACE_S"])
    overdue = EvaluationRun.objects.filter(
        status=RunStatus.QUEUED, submission__status=Submission.Status.QUEUED, shard_count=0
    ).filter(
        Q(dispatched_at__lt=grace_cutoff)
        | Q(dispatched_at__isnull=True, created_at__lt=grace_cutoff)
    )
    for run in overdue.select_related("submission").order_by("created_at", "pk"):
        if not _waiting_in_line(run):
            _resend_or_fail(run, report)
    _reap_shards(report, stale_cutoff=stale_cutoff, grace_cutoff=grace_cutoff)
    if (
        report.requeued
        or report.resent
        or report.failed
        or report.shards_requeued
        or report.shards_resent
    ):
        logger.warning("reaper: %s", report)
    return report
