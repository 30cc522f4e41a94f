"""The reaper: nothing is lost when a worker dies or the broker drops its messages.

The database is the source of truth. Run periodically (Celery beat sends
``submissions.reap_runs``; ``manage.py reap_runs`` runs it once), it watches every run
shard by shard (``submissions.shards``; a run that is not split is one shard):

* a running shard whose heartbeat is older than ``HEARTBEAT_STALE_S`` is declared lost and
  tried again alone (``shards.shard_retry``), up to ``MAX_ATTEMPTS`` tries of that shard;
  the run's other shards are left alone;
* a queued shard that no worker took within ``QUEUED_GRACE_S``, while no older live shard
  of another run held its queue, has its run's id sent again (the broker lost the message;
  a duplicate message is harmless: it finds no shard to take), up to ``MAX_ATTEMPTS`` sends.

Past either cap the submission fails with a ``platform:*`` error, which is refunded from
its owner's quota (``submissions.quotas``).

A queued shard whose hardware has no worker online is not lost: its message waits in the
broker for the first worker that starts. It is neither re-sent nor failed; once it has
waited ``NO_WORKER_NOTICE_S`` its submission's history says so and its owner is told by
e-mail, once.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from fleet.services import worker_nodes_online

from . import services, shards
from .models import EvaluationRun, Shard, StatusChange, Submission

logger = logging.getLogger(__name__)

RunStatus = EvaluationRun.Status
LIVE_RUNS = (RunStatus.QUEUED, RunStatus.RUNNING)


@dataclass
class ReapReport:
    """What one pass did (ids)."""

    requeued: list[int] = field(default_factory=list)  # lost shards tried again
    resent: list[int] = field(default_factory=list)  # queued shards whose message was re-sent
    failed: list[int] = field(default_factory=list)  # submissions failed at the cap
    unserved: list[int] = field(default_factory=list)  # submissions told no worker serves them

    def __str__(self) -> str:
        return (
            f"{len(self.requeued)} lost shards re-queued {self.requeued}, "
            f"{len(self.resent)} queued shards re-sent {self.resent}, "
            f"{len(self.failed)} submissions failed at the attempt cap {self.failed}, "
            f"{len(self.unserved)} submissions told that no worker serves them {self.unserved}"
        )


NO_WORKER_NOTE = "waiting: no worker for this hardware is online"


def _serves(hardware_slug: str, cache: dict[str, bool]) -> bool:
    if hardware_slug not in cache:
        cache[hardware_slug] = bool(
            worker_nodes_online(
                hardware_profile=hardware_slug,
                lost_after_s=settings.ATREX["FLEET_LOST_AFTER_S"],
            )
        )
    return cache[hardware_slug]


def _tell_unserved(shard: Shard, report: ReapReport) -> None:
    """Once per submission, after it has waited NO_WORKER_NOTICE_S with no worker for its
    hardware online: a line in its history, and an e-mail to its owner."""
    submission = shard.run.submission
    waited = timezone.now() - shard.run.created_at
    if waited < timedelta(seconds=settings.ATREX["NO_WORKER_NOTICE_S"]):
        return
    if submission.id in report.unserved:
        return
    with transaction.atomic():
        locked = Submission.objects.select_for_update().get(pk=submission.pk)
        if locked.status != Submission.Status.QUEUED:
            return
        if StatusChange.objects.filter(submission=locked, note__startswith=NO_WORKER_NOTE).exists():
            return
        minutes = int(waited.total_seconds() // 60)
        note = (
            f"{NO_WORKER_NOTE} ({locked.hardware.name}); it has waited {minutes} min and "
            "starts as soon as one does. Its owner can cancel it meanwhile."
        )
        StatusChange.objects.create(
            submission=locked, from_status=locked.status, to_status=locked.status, note=note
        )
    report.unserved.append(submission.pk)
    owner = submission.owner
    if owner.email:
        send_mail(
            subject=f"Atrex-Bench: submission #{submission.pk} is waiting for a worker",
            message=(
                f"Your submission #{submission.pk} ({submission.title}) has waited {minutes} "
                f"min in the queue for {locked.hardware.name}, and no worker for that hardware "
                "is online. It will start as soon as one is; you can also cancel it on its "
                "page (a cancelled submission does not count against your quota)."
            ),
            from_email=None,
            recipient_list=[owner.email],
            fail_silently=True,
        )


def _reap_stale(shard: Shard, report: ReapReport) -> None:
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
        report.requeued.append(shard.pk)
        return
    run = EvaluationRun.objects.select_related("submission").get(pk=shard.run_id)
    if run.status == RunStatus.FAILED and run.submission.status == Submission.Status.FAILED:
        report.failed.append(run.submission_id)


def _waiting_in_line(shard: Shard) -> bool:
    """A live shard of another run on the same queue that was queued before this one: the
    queue is busy, not broken, and this shard waits its turn."""
    fresh = timezone.now() - timedelta(seconds=settings.ATREX["HEARTBEAT_STALE_S"])
    return (
        Shard.objects.filter(
            run__queue=shard.run.queue,
            status=Shard.Status.RUNNING,
            heartbeat_at__gte=fresh,
            created_at__lte=shard.created_at,
        )
        .exclude(run=shard.run_id)
        .exists()
    )


def _resend_or_fail(shard: Shard, report: ReapReport) -> None:
    if shard.dispatch_count >= settings.ATREX["MAX_ATTEMPTS"]:
        which = (
            f"part {shard.index + 1} of the evaluation"
            if shard.run.shard_count > 1
            else "the evaluation"
        )
        error = services.QueueLost(
            f"No worker took {which} after it was sent {shard.dispatch_count} times (a failure "
            "on our side). This does not count against your quota; an admin has been told. "
            "Submit it again later."
        )
        with transaction.atomic():
            run = EvaluationRun.objects.select_for_update().get(pk=shard.run_id)
            lost = Shard.objects.filter(
                pk=shard.pk, status=Shard.Status.QUEUED, dispatch_count=shard.dispatch_count
            ).update(status=Shard.Status.LOST, finished_at=timezone.now(), error_code=error.code)
            if lost and shards.run_fail(run=run, error=error):
                logger.error("submission %s failed: queue %s lost it", run.submission_id,
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
        run = shard.run
        transaction.on_commit(lambda: services.evaluation_run_dispatch(run=run))
        report.resent.append(shard.pk)


def runs_reap() -> ReapReport:
    """One pass over running and queued shards (safe to run anywhere, any number of times)."""
    report = ReapReport()
    now = timezone.now()
    stale_cutoff = now - timedelta(seconds=settings.ATREX["HEARTBEAT_STALE_S"])
    stale = Shard.objects.filter(status=Shard.Status.RUNNING, run__status__in=LIVE_RUNS).filter(
        Q(heartbeat_at__lt=stale_cutoff) | Q(heartbeat_at__isnull=True, started_at__lt=stale_cutoff)
    )
    for shard in stale.order_by("pk"):
        _reap_stale(shard, report)
    grace_cutoff = now - timedelta(seconds=settings.ATREX["QUEUED_GRACE_S"])
    overdue = Shard.objects.filter(status=Shard.Status.QUEUED, run__status__in=LIVE_RUNS).filter(
        Q(dispatched_at__lt=grace_cutoff)
        | Q(dispatched_at__isnull=True, created_at__lt=grace_cutoff)
    )
    served: dict[str, bool] = {}
    queued = Shard.objects.filter(status=Shard.Status.QUEUED, run__status=RunStatus.QUEUED)
    for shard in queued.select_related(
        "run", "run__submission", "run__submission__hardware", "run__submission__owner"
    ).order_by("created_at", "pk"):
        if not _serves(shard.run.submission.hardware.slug, served):
            _tell_unserved(shard, report)
    for shard in overdue.select_related("run", "run__submission__hardware").order_by(
        "created_at", "pk"
    ):
        if not _serves(shard.run.submission.hardware.slug, served):
            continue  # no worker at all: the message waits for one, it is not lost
        if not _waiting_in_line(shard):
            _resend_or_fail(shard, report)
    if report.requeued or report.resent or report.failed or report.unserved:
        logger.warning("reaper: %s", report)
    return report
