"""Writes to the suite catalogue and the published scores."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from evaluator.hardware import PROFILES
from evaluator.suite import Suite

from .models import HardwareProfile, Operator, Score, Shape, SuiteOperator, SuiteVersion


def hardware_profiles_sync() -> list[HardwareProfile]:
    """Create or update the built-in hardware profiles from ``evaluator.hardware``."""
    rows = []
    for profile in PROFILES.values():
        row, _ = HardwareProfile.objects.update_or_create(
            slug=profile.slug,
            defaults={
                "name": profile.name,
                "device_kind": profile.device_kind,
                "peak_flops": dict(profile.peak_flops),
                "hbm_bytes_per_s": profile.hbm_bytes_per_s,
                "source": profile.source,
                "notes": profile.notes,
            },
        )
        rows.append(row)
    return rows


@transaction.atomic
def suite_version_import(*, suite: Suite, publish: bool = True) -> SuiteVersion:
    """Store a suite file as a suite version (idempotent on its content hash).

    The stored ``definition`` is exactly what the evaluator runs; the operator and shape
    rows are a browsable copy. An existing version with the same hash is returned as is.
    """
    suite.validate()
    existing = SuiteVersion.objects.filter(content_hash=suite.content_hash).first()
    if existing is not None:
        return existing
    version = SuiteVersion.objects.create(
        name=suite.name,
        version=suite.version,
        description=suite.description,
        content_hash=suite.content_hash,
        definition=suite.to_dict(),
        threshold_own_share=suite.threshold_own_share,
        status=SuiteVersion.Status.PUBLISHED if publish else SuiteVersion.Status.DRAFT,
        published_at=timezone.now() if publish else None,
    )
    operators = {}
    for entry in suite.operators:
        operator, _ = Operator.objects.get_or_create(
            slug=entry.slug,
            defaults={
                "atrex_id": entry.atrex_id,
                "description": entry.description,
                "dtype": entry.dtype,
                "phase": entry.phase,
            },
        )
        operators[entry.slug] = operator
        SuiteOperator.objects.create(
            suite_version=version,
            operator=operator,
            importance=entry.importance,
            importance_raw=entry.importance_raw,
        )
    Shape.objects.bulk_create(
        Shape(
            suite_version=version,
            operator=operators[shape.operator],
            shape_id=shape.shape_id,
            init_kwargs=shape.init_kwargs,
            input_kwargs=shape.input_kwargs,
            weight=shape.weight,
            w_flops=shape.w_flops,
            q_read=shape.q_read,
            q_write=shape.q_write,
            visibility=shape.visibility,
            smoke=shape.smoke,
            source=shape.source,
            description=shape.description,
        )
        for shape in suite.shapes
    )
    return version


def score_publish(*, run, scores: dict, operator_scores: dict[str, float]) -> Score:
    """Store a run's headline figures on the board (replacing the submission's old row)."""
    submission = run.submission
    ci = scores.get("aggregate_ci") or [None, None]
    score, _ = Score.objects.update_or_create(
        submission=submission,
        defaults={
            "run": run,
            "suite_version_id": submission.suite_version_id,
            "hardware_id": submission.hardware_id,
            "aggregate": scores["aggregate"],
            "aggregate_ci_low": ci[0],
            "aggregate_ci_high": ci[1],
            "apparent_pass_rate": scores["apparent_pass_rate"],
            "real_pass_rate": scores["real_pass_rate"],
            "fallback_rate": scores["fallback_rate"],
            "geomean_speedup_eager": scores.get("geomean_speedup_eager"),
            "operator_scores": operator_scores,
            "published_at": timezone.now(),
        },
    )
    return score
