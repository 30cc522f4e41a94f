"""Publishing results that were measured outside a worker (e.g. a GPU run through a batch
job), with their provenance: the baseline rows of the board.

Two formats are read: the evaluator's ``results.json`` (schema ``atrex-results/1``), and
the eager-reference baseline written by ``bench/reference_baseline.py``, whose shapes are
all PyTorch by definition and are therefore imported as ``fallback`` (score 0; their
times are the speedup denominator).
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from evaluator.errors import UserError
from leaderboard.models import HardwareProfile, SuiteVersion

from . import services
from .models import EvaluationRun, StatusChange, Submission

EAGER_MARK = "PyTorch eager reference"


def _eager_baseline_as_results(report: dict) -> dict:
    """The reference-baseline report in the evaluator's results schema (all fallback)."""
    operators = []
    for operator in report["operators"]:
        shapes = []
        for shape in operator["shapes"]:
            measured = shape.get("status") == "pass"
            shapes.append(
                {
                    "shape_id": shape["shape_id"],
                    "weight": shape["weight"],
                    "status": "fallback" if measured else "runtime_error",
                    "time_ms": shape.get("time_ms"),
                    "time_spread_ms": shape.get("time_spread_ms"),
                    "reps": shape.get("reps"),
                    "reference_time_ms": shape.get("time_ms"),
                    "t_sol_ms": shape.get("t_sol_ms"),
                    "roofline_fraction": shape.get("roofline_fraction"),
                    "speedup": 1.0 if measured else None,
                    "own_kernel_share": 0.0 if measured else None,
                    "error": None if measured else shape.get("error"),
                }
            )
        operators.append(
            {"operator": operator["operator"], "status": "ok", "shapes": shapes, "warnings": []}
        )
    return {
        "schema": "atrex-results/1",
        "harness_version": report["environment"].get("harness_version", ""),
        "suite": report["suite"],
        "environment": report["environment"],
        "operators": operators,
        "error": None,
    }


def _check_shapes(results: dict, suite_version: SuiteVersion) -> None:
    known = {
        (shape["operator"], str(shape["shape_id"])) for shape in suite_version.definition["shapes"]
    }
    for operator in results["operators"]:
        for shape in operator["shapes"]:
            if (operator["operator"], str(shape["shape_id"])) not in known:
                raise UserError(
                    f"{operator['operator']} shape {shape['shape_id']} is not in "
                    f"{suite_version.slug}: these results were measured on another suite.",
                    code="import:unknown-shape",
                )


def submission_import_results(
    *,
    owner,
    report: dict,
    suite_version: SuiteVersion,
    hardware: HardwareProfile,
    title: str,
    provenance_note: str,
    dsl: str = "",
    is_baseline: bool = True,
) -> Submission:
    """Create a published submission from results measured elsewhere, with a history entry
    and notes that say where they came from."""
    if report.get("schema") == "atrex-results/1":
        results = report
    elif str(report.get("what", "")).startswith(EAGER_MARK):
        results = _eager_baseline_as_results(report)
    else:
        raise UserError("Not an evaluator results file nor an eager baseline report.")
    _check_shapes(results, suite_version)
    with transaction.atomic():
        submission = Submission.objects.create(
            owner=owner,
            title=title,
            suite_version=suite_version,
            hardware=hardware,
            dsl=dsl,
            notes=provenance_note,
            is_baseline=is_baseline,
            upload_name="",
        )
        StatusChange.objects.create(submission=submission, to_status=Submission.Status.RECEIVED)
        services.submission_transition(
            submission=submission,
            from_status=Submission.Status.RECEIVED,
            to_status=Submission.Status.SCORING,
            note=f"imported results: {provenance_note}",
        )
        now = timezone.now()
        run = EvaluationRun.objects.create(
            submission=submission,
            status=EvaluationRun.Status.RUNNING,
            queue=hardware.queue,
            worker=str((results.get("environment") or {}).get("hostname", "")),
            started_at=now,
            heartbeat_at=now,
        )
    services.evaluation_run_score_and_publish(run=run, results=results)
    submission.refresh_from_db()
    return submission
