"""Writes for submissions and evaluation runs: the job state machine lives here.

Every status move is a compare-and-set (``filter(pk=…, status=OLD).update(status=NEW)``),
recorded in the submission's history, so two workers can never both move a job.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeVar

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.core.files.uploadedfile import UploadedFile
from django.db import InterfaceError, OperationalError, connection, transaction
from django.utils import timezone

from atrex_site.celery import app as celery_app
from catalogue import selectors as catalogue_selectors
from catalogue.models import HardwareProfile, SuiteVersion
from evaluator.bundle import inspect_bundle
from evaluator.errors import AtrexError, BundleError, PlatformError
from evaluator.measurement_policy import measured_as_round
from evaluator.scoring import operator_verdict, summarize
from evaluator.verdicts import hold_note, hold_signals, shape_codes

from . import run_split
from .models import EvaluationRun, OperatorResult, ShapeResult, StatusChange, Submission
from .quotas import quota_check
from .scores import score_publish

logger = logging.getLogger(__name__)

Status = Submission.Status
EVALUATE_TASK = "submissions.evaluate_run"

# The moves the state machine allows. Anything else is a bug and raises.
ALLOWED_MOVES: dict[str, set[str]] = {
    # received -> scoring: results measured elsewhere and imported (submissions.result_import).
    Status.RECEIVED: {Status.VALIDATING, Status.CANCELLED, Status.SCORING},
    Status.VALIDATING: {Status.QUEUED, Status.REJECTED, Status.FAILED},
    Status.QUEUED: {Status.RUNNING, Status.CANCELLED, Status.FAILED},
    Status.RUNNING: {Status.SCORING, Status.FAILED, Status.QUEUED, Status.CANCELLED},
    Status.SCORING: {Status.PUBLISHED, Status.HELD_FOR_REVIEW, Status.FAILED},
    Status.HELD_FOR_REVIEW: {Status.PUBLISHED, Status.REJECTED},
    Status.PUBLISHED: {Status.QUEUED},
    Status.FAILED: {Status.QUEUED},
    Status.REJECTED: set(),
    Status.CANCELLED: set(),
}


class IllegalTransition(PlatformError):
    code = "platform:illegal-transition"


class RoundMeasurement(PlatformError):
    code = "platform:round-measurement"


ROUND_MEASUREMENT_MESSAGE = (
    "These results were measured with an agent round's policy (fewer correctness trials, a "
    "lighter timing rule: environment.measurement.kind is 'round'). Round figures are "
    "feedback for the agent; a board publishes only a full evaluation."
)


class WorkerLost(PlatformError):
    code = "platform:worker-lost"


class QueueLost(PlatformError):
    code = "platform:queue-lost"


class RunTakenOver(PlatformError):
    """This worker's run was declared lost (no heartbeat) and replaced: stop working on it."""

    code = "platform:run-taken-over"


def submission_transition(
    *,
    submission: Submission,
    from_status: str,
    to_status: str,
    note: str = "",
    error: AtrexError | None = None,
) -> bool:
    """Move ``submission`` from ``from_status`` to ``to_status`` if it is still there.

    Returns False (and changes nothing) when another process moved it first.
    """
    if to_status not in ALLOWED_MOVES.get(from_status, set()):
        raise IllegalTransition(f"A submission cannot go from {from_status} to {to_status}.")
    now = timezone.now()
    fields = {"status": to_status, "status_changed_at": now}
    if error is not None:
        fields.update(error_code=error.code, error_message=error.message)
    elif to_status in (Status.QUEUED, Status.RUNNING, Status.SCORING, Status.PUBLISHED):
        fields.update(error_code="", error_message="")
    with transaction.atomic():
        moved = Submission.objects.filter(pk=submission.pk, status=from_status).update(**fields)
        if not moved:
            return False
        StatusChange.objects.create(
            submission=submission, from_status=from_status, to_status=to_status, note=note
        )
    for name, value in fields.items():
        setattr(submission, name, value)
    return True


@dataclass(frozen=True)
class Provenance:
    dsl: str = ""
    model_name: str = ""
    agent_name: str = ""
    agent_version: str = ""
    notes: str = ""


def submission_create(
    *,
    owner: User,
    upload: UploadedFile,
    title: str = "",
    visibility: str = Submission.Visibility.PUBLIC,
    suite_version: SuiteVersion | None = None,
    hardware: HardwareProfile | None = None,
    provenance: Provenance | None = None,
    is_baseline: bool = False,
) -> Submission:
    """Keep the upload, record the submission, then validate it (and queue it if valid).

    The submission row and the file are stored before anything can fail, so a rejected
    upload is still there for its owner to see, with the reason. Over its owner's limits
    (``submissions.quotas``) nothing is stored and ``QuotaExceeded`` says when to retry.
    """
    suite_version = suite_version or catalogue_selectors.suite_version_default()
    hardware = hardware or catalogue_selectors.hardware_default()
    if suite_version is None or hardware is None:
        raise PlatformError("No published suite or hardware profile: run `manage.py seed_suite`.")
    provenance = provenance or Provenance()
    max_bytes = settings.ATREX["MAX_UPLOAD_BYTES"]
    too_large = upload.size > max_bytes
    submission = Submission(
        owner=owner,
        title=(title or "").strip()[:200],
        visibility=visibility,
        suite_version=suite_version,
        hardware=hardware,
        upload_name=(upload.name or "")[:255],
        upload_size=upload.size or 0,
        dsl=provenance.dsl,
        model_name=provenance.model_name,
        agent_name=provenance.agent_name,
        agent_version=provenance.agent_version,
        notes=provenance.notes,
        is_baseline=is_baseline,
    )
    with transaction.atomic():
        # One owner's uploads are counted one at a time, so two at once cannot both pass.
        get_user_model().objects.select_for_update().filter(pk=owner.pk).first()
        quota_check(owner=owner)
        if not too_large:
            digest = hashlib.sha256()
            for chunk in upload.chunks():
                digest.update(chunk)
            submission.upload_sha256 = digest.hexdigest()
            upload.seek(0)
            submission.upload.save(upload.name or "upload", upload, save=False)
        submission.save()
        StatusChange.objects.create(submission=submission, to_status=Status.RECEIVED)
    if too_large:
        _reject(
            submission,
            BundleError(
                f"The upload is {upload.size:,} bytes; the limit is {max_bytes:,} bytes. "
                "Remove build outputs and data files and upload the sources only.",
                code="bundle:too-large",
            ),
            from_status=Status.RECEIVED,
        )
        return submission
    submission_validate(submission=submission)
    return submission


def _reject(submission: Submission, error: BundleError, *, from_status: str) -> None:
    if from_status == Status.RECEIVED:
        submission_transition(
            submission=submission, from_status=Status.RECEIVED, to_status=Status.VALIDATING
        )
    submission_transition(
        submission=submission,
        from_status=Status.VALIDATING,
        to_status=Status.REJECTED,
        error=error,
        note=error.code,
    )


def submission_validate(*, submission: Submission) -> None:
    """Check the upload without executing it; queue it when valid, reject it when not."""
    if not submission_transition(
        submission=submission, from_status=Status.RECEIVED, to_status=Status.VALIDATING
    ):
        return
    known = [op["slug"] for op in submission.suite_version.definition["operators"]]
    try:
        manifest = inspect_bundle(
            submission.upload.path,
            filename=submission.upload_name,
            known_operators=known,
            max_bytes=settings.ATREX["MAX_UPLOAD_BYTES"],
            max_entries=settings.ATREX["MAX_BUNDLE_ENTRIES"],
        )
    except BundleError as error:
        _reject(submission, error, from_status=Status.VALIDATING)
        return
    metadata = dict(manifest.metadata or {})
    submission.manifest = {
        "operators": dict(manifest.operators),
        "files": list(manifest.files),
        "metadata": metadata,
        "warnings": list(manifest.warnings),
    }
    submission.title = submission.title or str(metadata.get("title") or submission.upload_name)
    submission.dsl = submission.dsl or str(metadata.get("dsl") or "")
    submission.model_name = submission.model_name or str(metadata.get("model") or "")
    submission.agent_name = submission.agent_name or str(metadata.get("agent") or "")
    submission.notes = submission.notes or str(metadata.get("notes") or "")
    submission.save(update_fields=["manifest", "title", "dsl", "model_name", "agent_name", "notes"])
    submission_enqueue(submission=submission, from_status=Status.VALIDATING)


def submission_enqueue(
    *, submission: Submission, from_status: str, note: str = "", dispatch: bool = True
) -> EvaluationRun:
    """Create the next evaluation run, split into its shards (``submissions.run_split``),
    and send the run's id to the hardware's queue once per shard, on commit: each message
    lets one worker take one queued shard of the run. ``dispatch=False`` creates the run
    without sending it (the caller runs it at once)."""
    with transaction.atomic():
        if not submission_transition(
            submission=submission, from_status=from_status, to_status=Status.QUEUED, note=note
        ):
            raise IllegalTransition(f"Submission {submission.pk} is no longer {from_status}.")
        attempt = submission.runs.count() + 1
        run = EvaluationRun.objects.create(
            submission=submission, attempt=attempt, queue=submission.hardware.queue
        )
        count = run_split.shards_wanted(submission, run=run)
        created = run_split.shards_create(
            run=run, submission=submission, count=count, dispatch=dispatch
        )
        if dispatch:
            for _ in created:
                transaction.on_commit(lambda: evaluation_run_dispatch(run=run))
    return run


def evaluation_run_dispatch(*, run: EvaluationRun) -> None:
    """Send the run's id (and nothing else) to its hardware queue: a worker that takes the
    message evaluates one queued shard of the run (``submissions.shards``).

    The rows are committed first, so a broker that cannot be reached loses nothing: the
    reaper sends the id again once a shard has waited past its grace period."""
    try:
        celery_app.send_task(EVALUATE_TASK, args=[run.pk], queue=run.queue)
    except Exception:  # noqa: BLE001 - any broker failure; the reaper re-sends the run
        logger.exception("could not send run %s to %s; the reaper will send it", run.pk, run.queue)


# --- Shared by the run path (``submissions.shards``) and the reaper ---

T = TypeVar("T")
DB_DOWN = (OperationalError, InterfaceError)
"""The errors of a database that cannot be reached (a restart, a failover)."""


def worker_identity() -> str:
    """``host:pid`` of this process, recorded on the shards (and runs) it holds."""
    return f"{socket.gethostname()}:{os.getpid()}"


def drop_connection() -> None:
    """Close this thread's database connection, which may already be broken."""
    try:
        connection.close()
    except Exception:  # noqa: BLE001 - a broken connection may fail to close; it is gone
        pass


def with_db_retry(action: Callable[[], T], *, what: str) -> T:
    """Run ``action`` (a whole transaction), retrying while the database is unreachable
    (a restart, a failover) for up to ``ATREX["DB_RETRY_S"]`` seconds."""
    deadline = time.monotonic() + settings.ATREX["DB_RETRY_S"]
    delay = 0.5
    while True:
        try:
            return action()
        except DB_DOWN as error:
            if time.monotonic() > deadline:
                raise
            logger.warning("database unreachable while %s (%s); retrying", what, error)
            drop_connection()
            time.sleep(delay)
            delay = min(2 * delay, 5.0)


def holder_alive(
    *, worker: str, heartbeat_at: datetime | None, now: datetime | None = None
) -> bool:
    """Whether the worker holding a running shard is still working on it.

    Dead: no heartbeat within ``HEARTBEAT_STALE_S``; or the holder is a process of this
    host that no longer exists; or it is this very process (whose earlier task ended)."""
    now = now or timezone.now()
    stale_after = timedelta(seconds=settings.ATREX["HEARTBEAT_STALE_S"])
    if heartbeat_at is None or heartbeat_at < now - stale_after:
        return False
    host, _, pid = worker.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True
    if int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# --- Storing, scoring and publishing a run's (merged) results ---


def _seconds(value: object) -> float | None:
    """A finite, non-negative number of seconds from a results document, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


@transaction.atomic
def _store_results(run: EvaluationRun, results: dict, *, importance: dict[str, float]) -> None:
    OperatorResult.objects.filter(run=run).delete()
    ShapeResult.objects.filter(run=run).delete()
    for operator in results.get("operators", []):
        # The verdict is recomputed from the shapes' statuses and codes, never read.
        verdict = operator_verdict(operator.get("shapes", []))
        OperatorResult.objects.create(
            run=run,
            operator=operator["operator"],
            status=operator.get("status", ""),
            score=verdict["score"],
            importance=importance.get(operator["operator"], 0.0),
            error=operator.get("error") or "",
            warnings=operator.get("warnings") or [],
            wall_s=_seconds(operator.get("wall_s")),
            verdict=verdict["verdict"],
            shapes_total=verdict["shapes_total"],
            apparent_passes=verdict["apparent_passes"],
            real_passes=verdict["real_passes"],
            wrong_shapes=verdict["wrong_shapes"],
            hold_codes=verdict["hold_codes"],
        )
        ShapeResult.objects.bulk_create(
            ShapeResult(
                run=run,
                operator=operator["operator"],
                shape_id=str(shape["shape_id"]),
                status=shape.get("status", ""),
                weight=shape.get("weight", 1.0),
                time_ms=shape.get("time_ms"),
                time_spread_ms=shape.get("time_spread_ms"),
                reps=shape.get("reps"),
                reference_time_ms=shape.get("reference_time_ms"),
                t_sol_ms=shape.get("t_sol_ms"),
                roofline_fraction=shape.get("roofline_fraction"),
                speedup=shape.get("speedup"),
                own_kernel_share=shape.get("own_kernel_share"),
                max_abs_error=shape.get("max_abs_error"),
                error=shape.get("error") or "",
                codes=shape_codes(shape),
            )
            for shape in operator.get("shapes", [])
        )


@transaction.atomic
def evaluation_run_score_and_publish(
    *, run: EvaluationRun, results: dict, log_tail: str = ""
) -> EvaluationRun:
    """Store a run's results (its submission is in ``scoring``), score them with the suite
    version's importance, then publish them, or hold the whole submission for review when
    any shape carries a sign of deception (a ``hold`` code of ``evaluator.verdicts``):
    nothing of it is published until staff release it (``curation.submission_release``).
    Results measured with an agent round's policy (``evaluator.measurement_policy``) are
    never published: the run and its submission fail, nothing of them is stored as scores."""
    submission = run.submission
    if measured_as_round(results):
        error = RoundMeasurement(ROUND_MEASUREMENT_MESSAGE)
        EvaluationRun.objects.filter(pk=run.pk).update(
            status=EvaluationRun.Status.FAILED,
            finished_at=timezone.now(),
            error_code=error.code,
            error_message=error.message,
            environment=results.get("environment") or {},
            log_tail=log_tail,
        )
        submission_transition(
            submission=submission,
            from_status=Status.SCORING,
            to_status=Status.FAILED,
            error=error,
            note=error.code,
        )
        run.refresh_from_db()
        return run
    # One scoring definition (evaluator.scoring), with the importance this suite version
    # publishes: the site does not trust figures it can recompute.
    importance = {
        op["slug"]: op["importance"] for op in submission.suite_version.definition["operators"]
    }
    _store_results(run, results, importance=importance)
    scores = summarize(operators=results.get("operators", []), importance=importance)
    verdicts = {
        op["operator"]: operator_verdict(op.get("shapes", []))
        for op in results.get("operators", [])
    }
    operator_scores = {slug: verdict["score"] for slug, verdict in verdicts.items()}
    environment = results.get("environment") or {}
    EvaluationRun.objects.filter(pk=run.pk).update(
        status=EvaluationRun.Status.SUCCEEDED,
        finished_at=timezone.now(),
        results={**results, "scores": scores},
        environment=environment,
        harness_version=results.get("harness_version", ""),
        log_tail=log_tail,
        shapes_done=scores.get("shapes_total", 0),
        shapes_total=scores.get("shapes_total", 0),
    )
    run.refresh_from_db()
    signals = hold_signals(results.get("operators", []))
    if signals:
        submission_transition(
            submission=submission,
            from_status=Status.SCORING,
            to_status=Status.HELD_FOR_REVIEW,
            note=hold_note(signals),
        )
        return run
    score_publish(
        run=run,
        scores=scores,
        operator_scores=operator_scores,
        operator_verdicts={slug: v["verdict"] for slug, v in verdicts.items()},
    )
    submission_transition(
        submission=submission, from_status=Status.SCORING, to_status=Status.PUBLISHED
    )
    return run
