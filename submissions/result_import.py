"""Publishing results that were measured outside a worker (e.g. a GPU run through a batch
job), with their provenance: the baseline rows of the board.

Two formats are read: the evaluator's ``results.json`` (schema ``atrex-results/1``), and
the PyTorch baselines written by ``bench/reference_baseline.py`` (``--mode eager`` or
``--mode compile``), whose shapes are all PyTorch by definition and are therefore imported
as ``fallback`` (score 0; their times are the denominators of the speedups over eager and
over torch.compile). A baseline's kind is kept in ``Submission.manifest["baseline"]``.
"""

from __future__ import annotations

import copy

from django.db import transaction
from django.utils import timezone

from catalogue.models import HardwareProfile, SuiteVersion
from evaluator.errors import UserError
from evaluator.measurement_policy import measured_as_round

from . import services
from .models import EvaluationRun, StatusChange, Submission
from .scores import (
    COMPILE_BASELINE,
    IDIOMATIC_BASELINE,
    baseline_times,
    scores_refresh_compile_speedup,
)

EAGER_MARK = "PyTorch eager reference"
COMPILE_MARK = "torch.compile of the PyTorch reference"
# bench/reference_baseline.py --mode baseline: the idiomatic PyTorch of evaluator/baselines/.
IDIOMATIC_MARK = "Eager baseline of every operator"


def _baseline_kind(report: dict) -> str | None:
    what = str(report.get("what", ""))
    if what.startswith(EAGER_MARK):
        return "eager"
    if what.startswith(COMPILE_MARK):
        return COMPILE_BASELINE
    if what.startswith(IDIOMATIC_MARK):
        return IDIOMATIC_BASELINE
    return None


def _baseline_as_results(report: dict) -> dict:
    """A reference-baseline report (eager or compiled) in the evaluator's results schema
    (all fallback). Shapes a deadline left unmeasured are ``missing``."""
    # Each eager row is its own denominator (speedup 1); its shapes are fallbacks anyway.
    eager = _baseline_kind(report) in ("eager", IDIOMATIC_BASELINE)
    operators = []
    for operator in report["operators"]:
        shapes = []
        for shape in operator["shapes"]:
            measured = shape.get("status") == "pass"
            unmeasured = "missing" if shape.get("status") == "not_run" else "runtime_error"
            shapes.append(
                {
                    "shape_id": shape["shape_id"],
                    "weight": shape["weight"],
                    "status": "fallback" if measured else unmeasured,
                    "time_ms": shape.get("time_ms"),
                    "time_spread_ms": shape.get("time_spread_ms"),
                    "reps": shape.get("reps"),
                    "reference_time_ms": shape.get("time_ms") if eager else None,
                    "t_sol_ms": shape.get("t_sol_ms"),
                    "roofline_fraction": shape.get("roofline_fraction"),
                    "speedup": 1.0 if measured and eager else None,
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


def _pad_unmeasured(results: dict, suite_version: SuiteVersion) -> None:
    """Enter every shape of the report's shape set (the suite's scored shapes, or its smoke
    shapes for a report measured on those) that a baseline report does not hold (an
    operator its run never reached) as ``missing``, so that its rates count the whole
    set, as an evaluator's results do."""
    smoke_set = (results.get("suite") or {}).get("shape_set") == "smoke"
    present = {
        (operator["operator"], str(shape["shape_id"]))
        for operator in results["operators"]
        for shape in operator["shapes"]
    }
    by_operator = {operator["operator"]: operator for operator in results["operators"]}
    for shape in suite_version.definition["shapes"]:
        if bool(shape.get("smoke")) != smoke_set:
            continue
        if (shape["operator"], str(shape["shape_id"])) in present:
            continue
        entry = by_operator.get(shape["operator"])
        if entry is None:
            entry = {
                "operator": shape["operator"],
                "status": "missing",
                "shapes": [],
                "warnings": [],
            }
            by_operator[shape["operator"]] = entry
            results["operators"].append(entry)
        entry["shapes"].append(
            {
                "shape_id": shape["shape_id"],
                "weight": shape["weight"],
                "status": "missing",
                "error": "the baseline run did not reach this shape",
            }
        )


EAGER_BASELINE_HARNESS = (0, 3, 4)
"""The first harness version whose speedup over eager divides by the idiomatic baseline
(docs/decisions.md 17); earlier results divided by the reference's eager time."""


def _version(text: str) -> tuple[int, ...]:
    parts = []
    for part in str(text).split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def _redivide_by_the_eager_baseline(
    results: dict, suite_version: SuiteVersion, hardware: HardwareProfile
) -> str:
    """Results of a harness before 0.3.4 divided their speedups by the reference's eager
    time; where the board has an idiomatic eager baseline row (imported before them), each
    timed shape's eager time and speedup are taken from that row instead, so that every
    speedup on the board has the same denominator. Returns a sentence for the provenance
    note (empty when nothing changed)."""
    if _version(results.get("harness_version", "")) >= EAGER_BASELINE_HARNESS:
        return ""
    times = baseline_times(
        kind=IDIOMATIC_BASELINE, suite_version_id=suite_version.pk, hardware_id=hardware.pk
    )
    if not times:
        return (
            " Its speedups over eager divide by the reference's eager time (harness "
            f"{results.get('harness_version') or 'unknown'}): this board has no idiomatic "
            "eager baseline row to divide by."
        )
    changed = 0
    for operator in results["operators"]:
        for shape in operator["shapes"]:
            time_ms = shape.get("time_ms")
            if not time_ms or time_ms <= 0:
                continue
            eager_ms = times.get((operator["operator"], str(shape["shape_id"])))
            shape["reference_time_ms"] = eager_ms
            shape["speedup"] = eager_ms / time_ms if eager_ms else None
            shape["eager_timed"] = "baseline" if eager_ms else None
            changed += 1
    return (
        f" Speedups over eager of its {changed} timed shapes divide by this board's idiomatic "
        "eager baseline row (measured with harness "
        f"{results.get('harness_version') or 'unknown'}, which divided by the reference)."
    )


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
    baseline_kind = _baseline_kind(report)
    if report.get("schema") == "atrex-results/1":
        results = copy.deepcopy(report)  # its speedups may be re-divided below
    elif baseline_kind is not None:
        results = _baseline_as_results(report)
    else:
        raise UserError(
            "Not an evaluator results file nor a baseline report of bench/reference_baseline.py."
        )
    if measured_as_round(results):
        raise UserError(
            "These results were measured with an agent round's policy (environment."
            "measurement.kind is 'round': fewer correctness trials, a lighter timing rule); "
            "a board publishes only a full evaluation. Evaluate the kernels again without "
            "--trials, --min-reps and --target-rel-se.",
            code="import:round-measurement",
        )
    _check_shapes(results, suite_version)
    if baseline_kind is not None:
        _pad_unmeasured(results, suite_version)
    else:
        provenance_note += _redivide_by_the_eager_baseline(results, suite_version, hardware)
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
            manifest={"baseline": baseline_kind} if baseline_kind else {},
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
        )
    services.evaluation_run_score_and_publish(run=run, results=results)
    submission.refresh_from_db()
    if baseline_kind == COMPILE_BASELINE and submission.status == Submission.Status.PUBLISHED:
        scores_refresh_compile_speedup(suite_version_id=suite_version.pk, hardware_id=hardware.pk)
    return submission
