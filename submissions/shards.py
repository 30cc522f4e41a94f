"""The one run path: every evaluation run has one or more shards (``Shard``), and each is
claimed, heartbeated, stored and merged here, whether the run was split or not.

``services.submission_enqueue`` creates a run and its shards (``submissions.run_split``)
and sends the run's id to the hardware's queue once per shard; a worker that takes such a
message claims one queued shard of the run (``shard_claim``) and runs
``python -m evaluator run --operators <its operators> --seed <the run's seed>``. The last
shard to succeed merges every shard's operator entries into one results document, then
scores and publishes it (``services.evaluation_run_score_and_publish``), under a lock on
the run row, so the merge happens once. A run of one shard publishes its document as the
evaluator wrote it.

A shard that fails on the platform's side, or whose worker stops heartbeating (the
reaper), is tried again alone as a new ``Shard`` row (same index, next attempt); the
other shards keep their results. Past ``MAX_ATTEMPTS`` tries of one shard the submission
fails with a ``platform:*`` error (refunded by ``submissions.quotas``). A bundle error in
any shard fails the submission.

Lock order everywhere: the run row, then shard rows. This module imports ``services``;
``services`` never imports it.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from evaluator.errors import AtrexError, BundleError, PlatformError

from . import evaluation, services
from .models import EvaluationRun, Shard, Submission

logger = logging.getLogger(__name__)

SHARD_TASK = "submissions.evaluate_shard"
"""The task of one shard by its id: what this site sent before a run's id was sent once
per shard; still served for the messages that a queue may hold."""
ShardStatus = Shard.Status
RunStatus = EvaluationRun.Status
Status = Submission.Status
# The shards whose progress counts on the run's page (lost and failed tries were replaced).
_CURRENT = (ShardStatus.QUEUED, ShardStatus.RUNNING, ShardStatus.SUCCEEDED)


class ShardFailed(PlatformError):
    code = "platform:shard-failed"


# --- Failing and retrying -------------------------------------------------------------------


def _run_locked(run_id: int) -> EvaluationRun:
    """The run, locked. Its submission is read again once the lock is held: a query that
    waited for the lock sees the run row as committed since, but a joined row as it was
    when the query began (PostgreSQL's read committed), e.g. still ``queued``."""
    run = (
        EvaluationRun.objects.select_for_update(of=("self",))
        .select_related("submission", "submission__suite_version", "submission__hardware")
        .get(pk=run_id)
    )
    run.submission.refresh_from_db(fields=["status", "status_changed_at", "error_code"])
    return run


def run_fail(*, run: EvaluationRun, error: AtrexError, log_tail: str = "") -> bool:
    """Fail a run (queued or running), its unfinished shards and its submission."""
    with transaction.atomic():
        failed = EvaluationRun.objects.filter(
            pk=run.pk, status__in=(RunStatus.QUEUED, RunStatus.RUNNING)
        ).update(
            status=RunStatus.FAILED,
            finished_at=timezone.now(),
            error_code=error.code,
            error_message=error.message,
            log_tail=log_tail,
        )
        if not failed:
            return False
        Shard.objects.filter(run=run, status__in=(ShardStatus.QUEUED, ShardStatus.RUNNING)).update(
            status=ShardStatus.CANCELLED,
            finished_at=timezone.now(),
            error_message=f"the run failed: {error.code}",
        )
        submission = Submission.objects.get(pk=run.submission_id)
        if submission.status in (Status.QUEUED, Status.RUNNING, Status.SCORING):
            services.submission_transition(
                submission=submission,
                from_status=submission.status,
                to_status=Status.FAILED,
                error=error,
                note=error.code,
            )
        return True


def shard_retry(
    *,
    shard: Shard,
    from_status: str,
    to_status: str,
    error: AtrexError,
    reason: str,
    dispatch: bool = True,
    heartbeat_at=None,
    log_tail: str = "",
) -> Shard | None:
    """Move ``shard`` from ``from_status`` to ``to_status`` (lost, failed) and queue its
    next attempt, or fail the run once ``MAX_ATTEMPTS`` tries of this shard were made.

    Compare-and-set under the run's lock (and on the heartbeat, when given: a worker that
    heartbeats meanwhile keeps its shard). Returns the new shard, else None."""
    with transaction.atomic():
        run = _run_locked(shard.run_id)
        matching = Shard.objects.filter(pk=shard.pk, status=from_status)
        if heartbeat_at is not None:
            matching = matching.filter(heartbeat_at=heartbeat_at)
        moved = matching.update(
            status=to_status,
            finished_at=timezone.now(),
            error_code=error.code,
            error_message=reason,
            log_tail=log_tail,
        )
        if not moved or run.status not in (RunStatus.QUEUED, RunStatus.RUNNING):
            return None
        cap = settings.ATREX["MAX_ATTEMPTS"]
        if shard.attempt >= cap:
            logger.error("run %s: shard %s failed %s times", run.pk, shard.index, shard.attempt)
            which = (
                f"Part {shard.index + 1} of {run.shard_count} of the evaluation"
                if run.shard_count > 1
                else "The evaluation"
            )
            run_fail(
                run=run,
                error=services.WorkerLost(
                    f"{which} was interrupted {shard.attempt} times by failures on our side "
                    f"(last: {reason}). This does not count against your quota; an admin has "
                    "been told. Submit it again later.",
                    code=error.code,
                ),
            )
            return None
        now = timezone.now()
        replacement = Shard.objects.create(
            run=run,
            index=shard.index,
            attempt=shard.attempt + 1,
            operators=shard.operators,
            shapes_total=shard.shapes_total,
            dispatched_at=now if dispatch else None,
            dispatch_count=1 if dispatch else 0,
        )
        logger.warning(
            "run %s: shard %s attempt %s %s (%s); attempt %s queued",
            run.pk, shard.index, shard.attempt, to_status, reason, replacement.attempt,
        )  # fmt: skip
        if dispatch:
            transaction.on_commit(lambda: services.evaluation_run_dispatch(run=run))
        return replacement


# --- Running one shard ----------------------------------------------------------------------


def _shard_to_take(run: EvaluationRun, shard_id: int | None) -> Shard | None:
    """The shard a message asks for (locked): the given one; else the run's first queued
    shard; else a running one whose holder is dead (the message was redelivered)."""
    rows = Shard.objects.select_for_update().filter(run=run)
    if shard_id is not None:
        return rows.get(pk=shard_id)
    queued = rows.filter(status=ShardStatus.QUEUED).order_by("index", "attempt").first()
    if queued is not None:
        return queued
    for running in rows.filter(status=ShardStatus.RUNNING).order_by("index", "attempt"):
        if not services.holder_alive(worker=running.worker, heartbeat_at=running.heartbeat_at):
            return running
    return None


def shard_claim(*, run_id: int | None = None, shard_id: int | None = None) -> Shard | None:
    """Take a shard for this worker (``shard_id``, else one of run ``run_id``), or None
    when there is nothing to do.

    Queued: taken (its run and submission move to running with the first shard).
    Finished: nothing (a redelivered message). Running with a live holder: nothing.
    Running with a dead holder: replaced by a new attempt, taken at once."""
    if shard_id is not None:
        run_id = Shard.objects.filter(pk=shard_id).values_list("run_id", flat=True).first()
        if run_id is None:
            logger.warning("shard %s does not exist: message dropped", shard_id)
            return None
    if not EvaluationRun.objects.filter(pk=run_id).exists():
        logger.warning("run %s does not exist: message dropped", run_id)
        return None
    with transaction.atomic():
        run = _run_locked(run_id)
        shard = _shard_to_take(run, shard_id)
        if shard is None:
            logger.info("run %s has no shard to take (run %s): nothing to do", run.pk, run.status)
            return None
        if shard.status == ShardStatus.RUNNING and run.status == RunStatus.RUNNING:
            if services.holder_alive(worker=shard.worker, heartbeat_at=shard.heartbeat_at):
                logger.info("shard %s is held by live worker %s", shard.pk, shard.worker)
                return None
            shard = shard_retry(
                shard=shard,
                from_status=ShardStatus.RUNNING,
                to_status=ShardStatus.LOST,
                error=services.WorkerLost(""),
                reason=f"worker {shard.worker or '?'} stopped (message redelivered)",
                dispatch=False,
            )
            if shard is None:
                return None
            run.refresh_from_db()
        if shard.status != ShardStatus.QUEUED:
            logger.info("shard %s is %s: nothing to do", shard.pk, shard.status)
            return None
        submission = run.submission
        now = timezone.now()
        if run.status == RunStatus.QUEUED:
            if not services.submission_transition(
                submission=submission, from_status=Status.QUEUED, to_status=Status.RUNNING
            ):
                # Cancelled or failed (the reaper) while the message waited.
                EvaluationRun.objects.filter(pk=run.pk, status=RunStatus.QUEUED).update(
                    status=RunStatus.CANCELLED, finished_at=now
                )
                Shard.objects.filter(run=run, status=ShardStatus.QUEUED).update(
                    status=ShardStatus.CANCELLED, finished_at=now
                )
                logger.info("run %s: submission is %s; cancelled", run.pk, submission.status)
                return None
            EvaluationRun.objects.filter(pk=run.pk).update(
                status=RunStatus.RUNNING, started_at=now, worker=services.worker_identity()
            )
        elif run.status != RunStatus.RUNNING or submission.status != Status.RUNNING:
            Shard.objects.filter(pk=shard.pk, status=ShardStatus.QUEUED).update(
                status=ShardStatus.CANCELLED, finished_at=now
            )
            logger.info("shard %s: run %s is %s; shard cancelled", shard.pk, run.pk, run.status)
            return None
        Shard.objects.filter(pk=shard.pk).update(
            status=ShardStatus.RUNNING,
            started_at=now,
            heartbeat_at=now,
            worker=services.worker_identity(),
        )
    return Shard.objects.select_related(
        "run", "run__submission", "run__submission__suite_version", "run__submission__hardware"
    ).get(pk=shard.pk)


def run_progress_refresh(*, run_id: int) -> None:
    """The run's shapes done and total: the sums over its current shards."""
    totals = Shard.objects.filter(run_id=run_id, status__in=_CURRENT).aggregate(
        done=Sum("shapes_done"), total=Sum("shapes_total")
    )
    fields = {"shapes_done": totals["done"] or 0, "shapes_total": totals["total"] or 0}
    EvaluationRun.objects.filter(pk=run_id, status=RunStatus.RUNNING).update(**fields)


class ShardHeartbeat:
    """Progress and liveness of one shard (and of its run, whose progress is the sum over
    its shards). A shard that is no longer ours raises ``RunTakenOver``, which stops the
    evaluator; a database outage is survived."""

    def __init__(self, shard: Shard) -> None:
        self.shard_id = shard.pk
        self.run_id = shard.run_id
        self.interval_s = settings.ATREX["HEARTBEAT_INTERVAL_S"]
        self.last_beat = time.monotonic()

    def __call__(self, event: dict) -> None:
        fields: dict = {}
        if "shapes_total" in event:
            fields["shapes_total"] = int(event["shapes_total"])
        if "shapes_done" in event:
            fields["shapes_done"] = int(event["shapes_done"])
        if not fields and time.monotonic() - self.last_beat < self.interval_s:
            return
        fields["heartbeat_at"] = timezone.now()
        try:
            written = Shard.objects.filter(
                pk=self.shard_id, status=ShardStatus.RUNNING, run__status=RunStatus.RUNNING
            ).update(**fields)
            if written:
                run_progress_refresh(run_id=self.run_id)
        except services.DB_DOWN as error:
            logger.warning("shard %s: heartbeat not written (%s); will retry", self.shard_id, error)
            services.drop_connection()
            return
        self.last_beat = time.monotonic()
        if not written:
            raise services.RunTakenOver(f"Shard {self.shard_id} was replaced or its run ended.")


def shard_execute(*, run_id: int | None = None, shard_id: int | None = None) -> Shard | None:
    """Run one shard (``shard_id``, else one of run ``run_id``) to its end. Idempotent: a
    message for a finished shard, or for one that a live worker holds, does nothing; one
    whose worker died starts a new attempt of that shard."""
    which = f"shard {shard_id}" if shard_id is not None else f"a shard of run {run_id}"
    shard = services.with_db_retry(
        lambda: shard_claim(run_id=run_id, shard_id=shard_id), what=f"claiming {which}"
    )
    if shard is None:
        return None
    run = shard.run
    submission = run.submission
    job = evaluation.EvaluatorJob(
        bundle_path=submission.upload.path,
        suite_definition=submission.suite_version.definition,
        hardware_slug=submission.hardware.slug,
        device=settings.ATREX["WORKER_DEVICE"],
        work_dir=(
            settings.ATREX["RUNS_DIR"] / f"run-{run.pk}" / f"shard-{shard.index}-{shard.attempt}"
        ),
        timeout_s=settings.ATREX["EVALUATION_TIMEOUT_S"],
        python=settings.ATREX["EVALUATOR_PYTHON"],
        extra_args=[
            *_evaluator_options(),
            "--operators",
            ",".join(shard.operators),
            "--seed",
            str(run.seed),
        ],
    )
    try:
        outcome = evaluation.run_evaluator(job, on_progress=ShardHeartbeat(shard))
    except services.RunTakenOver:
        logger.warning("shard %s was replaced while this worker ran it: stopped", shard.pk)
        return shard
    except PlatformError as error:
        logger.exception("shard %s failed on the platform side", shard.pk)
        failure = error  # the except clause unbinds ``error`` when it ends
        services.with_db_retry(
            lambda: shard_retry(
                shard=shard,
                from_status=ShardStatus.RUNNING,
                to_status=ShardStatus.FAILED,
                error=failure,
                reason=failure.message,
            ),
            what=f"failing shard {shard.pk}",
        )
        return shard
    return services.with_db_retry(
        lambda: shard_store(shard, outcome), what=f"storing shard {shard.pk}"
    )


def run_execute(*, run_id: int) -> EvaluationRun | None:
    """Run every shard of the run that this process can take, one after another, here
    (``manage.py seed_demo``; tests); a worker runs one shard per message instead."""
    while shard_execute(run_id=run_id) is not None:
        pass
    return EvaluationRun.objects.filter(pk=run_id).first()


def _evaluator_options() -> list[str]:
    budget = settings.ATREX.get("TIME_BUDGET_S")
    timings = settings.ATREX.get("REFERENCE_TIMINGS_DIR")
    return [
        *(["--time-budget-s", str(budget)] if budget else []),
        *(["--reference-timings", str(timings)] if timings else []),
    ]


def shard_store(shard: Shard, outcome: evaluation.EvaluatorOutcome) -> Shard:
    """Keep a finished shard's results; the last shard of the run merges and publishes.
    Only while the shard is still ours: a worker whose shard was replaced meanwhile (or a
    retried commit) stores nothing twice."""
    results = outcome.results or {}
    error = results.get("error")
    if error and str(error.get("code", "")).startswith("platform:"):
        shard_retry(
            shard=shard,
            from_status=ShardStatus.RUNNING,
            to_status=ShardStatus.FAILED,
            error=ShardFailed(error.get("message", ""), code=error.get("code")),
            reason=error.get("message", str(error)),
            log_tail=outcome.log_tail,
        )
        return shard
    with transaction.atomic():
        run = _run_locked(shard.run_id)
        held = Shard.objects.filter(pk=shard.pk, status=ShardStatus.RUNNING)
        if run.status != RunStatus.RUNNING or not held.exists():
            logger.warning("shard %s is no longer running here: results not stored", shard.pk)
            return shard
        if error:
            # A bundle the evaluator could not take (e.g. extraction): the user's to fix.
            failure = BundleError(error.get("message", str(error)), code=error.get("code"))
            held.update(
                status=ShardStatus.FAILED,
                finished_at=timezone.now(),
                error_code=failure.code,
                error_message=failure.message,
                log_tail=outcome.log_tail,
            )
            run_fail(run=run, error=failure, log_tail=outcome.log_tail)
            return shard
        shapes = sum(len(entry.get("shapes") or []) for entry in results.get("operators", []))
        held.update(
            status=ShardStatus.SUCCEEDED,
            finished_at=timezone.now(),
            results=results,
            log_tail=outcome.log_tail,
            shapes_done=shapes,
            shapes_total=shapes,
        )
        done = list(run.shards.filter(status=ShardStatus.SUCCEEDED).order_by("index", "-attempt"))
        latest = {s.index: s for s in reversed(done)}
        if len(latest) < run.shard_count:
            run_progress_refresh(run_id=run.pk)
            return shard
        merge = [latest[index] for index in sorted(latest)]
        submission = run.submission
        if not services.submission_transition(
            submission=submission, from_status=Status.RUNNING, to_status=Status.SCORING
        ):
            return shard
        order = [op["slug"] for op in submission.suite_version.definition["operators"]]
        merged = merge_results(
            [(s.index, s.attempt, s.worker, s.results) for s in merge], order=order
        )
        log_tail = (
            "\n".join(f"--- shard {s.index} ---\n{s.log_tail[-8000:]}" for s in merge)
            if len(merge) > 1
            else merge[0].log_tail
        )
        services.evaluation_run_score_and_publish(run=run, results=merged, log_tail=log_tail)
    return shard


def _parsed(stamp) -> datetime | None:
    try:
        return datetime.fromisoformat(str(stamp))
    except ValueError:
        return None


def merge_results(parts: list[tuple[int, int, str, dict]], *, order: list[str]) -> dict:
    """One results document (schema atrex-results/1) from the shards' documents.

    ``parts``: (index, attempt, worker, document) per shard. Operators in suite order;
    the top-level environment is the first shard's, and ``environment.shards`` keeps each
    shard's own (its worker, operators, wall time and environment). One part: its
    document as the evaluator wrote it. Scores are left to the site, which recomputes
    them from the operators."""
    documents = [document for _, _, _, document in parts]
    first = documents[0]
    if len(documents) == 1:
        return {**first, "error": None, "scores": None}
    entries = {entry["operator"]: entry for doc in documents for entry in doc["operators"]}
    rank = {slug: i for i, slug in enumerate(order)}
    operators = sorted(
        entries.values(), key=lambda e: (rank.get(e["operator"], len(rank)), e["operator"])
    )
    starts = [s for s in (_parsed(doc.get("started_at")) for doc in documents) if s]
    ends = [e for e in (_parsed(doc.get("finished_at")) for doc in documents) if e]
    environment = dict(first.get("environment") or {})
    environment["shards"] = [
        {
            "index": index,
            "attempt": attempt,
            "worker": worker,
            "operators": [entry["operator"] for entry in document["operators"]],
            "wall_s": document.get("wall_s"),
            "environment": document.get("environment") or {},
        }
        for index, attempt, worker, document in parts
    ]
    return {
        **first,
        "environment": environment,
        "started_at": min(starts).isoformat() if starts else first.get("started_at"),
        "finished_at": max(ends).isoformat() if ends else first.get("finished_at"),
        "wall_s": (
            (max(ends) - min(starts)).total_seconds()
            if starts and ends
            else max(float(doc.get("wall_s") or 0.0) for doc in documents)
        ),
        "error": None,
        "operators": operators,
        "scores": None,
    }
