"""Writes for submissions and evaluation runs: the job state machine lives here.

Every status move is a compare-and-set (``filter(pk=…, status=OLD).update(status=NEW)``),
recorded in the submission's history, so two workers can never both move a job.
"""

from __future__ import annotations

import hashlib
import logging
import socket
from dataclasses import dataclass

from celery import current_app
from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.utils import timezone

from evaluator.bundle import inspect_bundle
from evaluator.errors import AtrexError, BundleError, PlatformError
from evaluator.scoring import operator_score, summarize
from leaderboard import selectors as leaderboard_selectors
from leaderboard.models import HardwareProfile, SuiteVersion
from leaderboard.services import score_publish

from . import evaluation
from .models import EvaluationRun, OperatorResult, ShapeResult, StatusChange, Submission

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
    owner,
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
    upload is still there for its owner to see, with the reason.
    """
    suite_version = suite_version or leaderboard_selectors.suite_version_default()
    hardware = hardware or leaderboard_selectors.hardware_default()
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
    *, submission: Submission, from_status: str, note: str = ""
) -> EvaluationRun:
    """Create the next evaluation run and send its id to the hardware's queue on commit."""
    with transaction.atomic():
        if not submission_transition(
            submission=submission, from_status=from_status, to_status=Status.QUEUED, note=note
        ):
            raise IllegalTransition(f"Submission {submission.pk} is no longer {from_status}.")
        attempt = submission.runs.count() + 1
        run = EvaluationRun.objects.create(
            submission=submission, attempt=attempt, queue=submission.hardware.queue
        )
        transaction.on_commit(lambda: evaluation_run_dispatch(run=run))
    return run


def evaluation_run_dispatch(*, run: EvaluationRun) -> None:
    """Send the run's id (and nothing else) to its hardware queue."""
    current_app.send_task(EVALUATE_TASK, args=[run.pk], queue=run.queue)


def _progress_recorder(run: EvaluationRun):
    def record(event: dict) -> None:
        fields: dict = {"heartbeat_at": timezone.now()}
        if "shapes_total" in event:
            fields["shapes_total"] = int(event["shapes_total"])
        if "shapes_done" in event:
            fields["shapes_done"] = int(event["shapes_done"])
        EvaluationRun.objects.filter(pk=run.pk, status=EvaluationRun.Status.RUNNING).update(
            **fields
        )

    return record


def evaluation_run_execute(*, run_id: int) -> EvaluationRun | None:
    """Run one queued evaluation to its end. Idempotent: a run that is not queued is left
    alone, so a redelivered message does nothing (nor does one whose run is gone)."""
    run = (
        EvaluationRun.objects.select_related(
            "submission", "submission__suite_version", "submission__hardware"
        )
        .filter(pk=run_id)
        .first()
    )
    if run is None:
        logger.warning("run %s does not exist: message dropped", run_id)
        return None
    now = timezone.now()
    taken = EvaluationRun.objects.filter(pk=run.pk, status=EvaluationRun.Status.QUEUED).update(
        status=EvaluationRun.Status.RUNNING,
        started_at=now,
        heartbeat_at=now,
        worker=socket.gethostname(),
    )
    if not taken:
        logger.info("run %s is %s, not queued: nothing to do", run.pk, run.status)
        return run
    run.refresh_from_db()
    submission = run.submission
    submission_transition(
        submission=submission, from_status=Status.QUEUED, to_status=Status.RUNNING
    )
    job = evaluation.EvaluatorJob(
        bundle_path=submission.upload.path,
        suite_definition=submission.suite_version.definition,
        hardware_slug=submission.hardware.slug,
        device=settings.ATREX["WORKER_DEVICE"],
        work_dir=settings.ATREX["RUNS_DIR"] / f"run-{run.pk}",
        timeout_s=settings.ATREX["EVALUATION_TIMEOUT_S"],
        python=settings.ATREX["EVALUATOR_PYTHON"],
        extra_args=_evaluator_options(),
    )
    try:
        outcome = evaluation.run_evaluator(job, on_progress=_progress_recorder(run))
    except PlatformError as error:
        logger.exception("evaluation of run %s failed on the platform side", run.pk)
        _run_fail(run, error)
        return run
    return _run_store_and_score(run, outcome)


def _evaluator_options() -> list[str]:
    budget = settings.ATREX.get("TIME_BUDGET_S")
    return ["--time-budget-s", str(budget)] if budget else []


def _run_fail(run: EvaluationRun, error: AtrexError, log_tail: str = "") -> None:
    EvaluationRun.objects.filter(pk=run.pk).update(
        status=EvaluationRun.Status.FAILED,
        finished_at=timezone.now(),
        error_code=error.code,
        error_message=error.message,
        log_tail=log_tail,
    )
    submission = run.submission
    submission.refresh_from_db()
    if submission.status in (Status.RUNNING, Status.SCORING):
        submission_transition(
            submission=submission,
            from_status=submission.status,
            to_status=Status.FAILED,
            error=error,
            note=error.code,
        )


def _held_reasons(results: dict) -> list[str]:
    """Figures that no honest kernel produces; they wait for an admin, never auto-publish."""
    reasons = []
    for operator in results.get("operators", []):
        for shape in operator.get("shapes", []):
            fraction = shape.get("roofline_fraction")
            if shape.get("status") == "pass" and fraction is not None and fraction > 1.0:
                reasons.append(
                    f"{operator['operator']} shape {shape['shape_id']}: roofline fraction "
                    f"{fraction:.2f} is above 1.0 (faster than the hardware allows)"
                )
    return reasons


@transaction.atomic
def _store_results(run: EvaluationRun, results: dict, *, importance: dict[str, float]) -> None:
    OperatorResult.objects.filter(run=run).delete()
    ShapeResult.objects.filter(run=run).delete()
    for operator in results.get("operators", []):
        OperatorResult.objects.create(
            run=run,
            operator=operator["operator"],
            status=operator.get("status", ""),
            score=operator_score(operator.get("shapes", [])),
            importance=importance.get(operator["operator"], 0.0),
            error=operator.get("error") or "",
            warnings=operator.get("warnings") or [],
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
            )
            for shape in operator.get("shapes", [])
        )


def _run_store_and_score(run: EvaluationRun, outcome: evaluation.EvaluatorOutcome) -> EvaluationRun:
    results = outcome.results or {}
    submission = run.submission
    error = results.get("error")
    if error:
        # A bundle the evaluator could not take (caught on the worker, e.g. extraction).
        failure = BundleError(error.get("message", str(error)), code=error.get("code"))
        _run_fail(run, failure, log_tail=outcome.log_tail)
        return run
    if not submission_transition(
        submission=submission, from_status=Status.RUNNING, to_status=Status.SCORING
    ):
        return run
    return evaluation_run_score_and_publish(run=run, results=results, log_tail=outcome.log_tail)


def evaluation_run_score_and_publish(
    *, run: EvaluationRun, results: dict, log_tail: str = ""
) -> EvaluationRun:
    """Store a run's results (its submission is in ``scoring``), score them with the suite
    version's importance, then publish them or hold them for review."""
    submission = run.submission
    # One scoring definition (evaluator.scoring), with the importance this suite version
    # publishes: the site does not trust figures it can recompute.
    importance = {
        op["slug"]: op["importance"] for op in submission.suite_version.definition["operators"]
    }
    _store_results(run, results, importance=importance)
    scores = summarize(operators=results.get("operators", []), importance=importance)
    operator_scores = {
        op["operator"]: operator_score(op.get("shapes", [])) for op in results.get("operators", [])
    }
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
    held = _held_reasons(results)
    if held:
        submission_transition(
            submission=submission,
            from_status=Status.SCORING,
            to_status=Status.HELD_FOR_REVIEW,
            note="; ".join(held),
        )
        return run
    score_publish(run=run, scores=scores, operator_scores=operator_scores)
    submission_transition(
        submission=submission, from_status=Status.SCORING, to_status=Status.PUBLISHED
    )
    return run
