"""Published board rows made quickly: results in schema atrex-results/1 for the smoke
shapes of a suite, imported through ``submission_import_results`` (no evaluator run)."""

from __future__ import annotations

from typing import Any

from catalogue.models import HardwareProfile, SuiteVersion
from submissions.models import Submission
from submissions.result_import import submission_import_results


def smoke_results(
    suite: SuiteVersion,
    *,
    fraction: float | dict[str, float] = 0.5,
    spread: float = 0.0,
    status: str | dict[str, str] = "pass",
) -> dict[str, Any]:
    """Results for every smoke shape of ``suite``: each passing shape reaches ``fraction`` of
    the roofline (per operator if a dict), with a relative timing spread ``spread``."""
    operators: dict[str, list[dict[str, Any]]] = {}
    for shape in suite.definition["shapes"]:
        if not shape.get("smoke"):
            continue
        op = shape["operator"]
        op_fraction = fraction[op] if isinstance(fraction, dict) else fraction
        op_status = status.get(op, "pass") if isinstance(status, dict) else status
        t_sol_ms = 1e-3 * (1 + len(operators.get(op, [])))
        time_ms = t_sol_ms / op_fraction if op_fraction else None
        operators.setdefault(op, []).append(
            {
                "shape_id": shape["shape_id"],
                "weight": shape["weight"],
                "status": op_status,
                "time_ms": time_ms,
                "time_spread_ms": time_ms * spread if time_ms else None,
                "reps": 10,
                "reference_time_ms": 4 * t_sol_ms,
                "t_sol_ms": t_sol_ms,
                "roofline_fraction": op_fraction,
                "speedup": (4 * t_sol_ms / time_ms) if time_ms else None,
                "own_kernel_share": 1.0 if op_status == "pass" else 0.1,
                "error": None,
            }
        )
    return {
        "schema": "atrex-results/1",
        "harness_version": "test",
        "suite": suite.slug,
        "environment": {"device_name": "test device", "torch": "2.x", "hostname": "tests"},
        "operators": [
            {"operator": op, "status": "ok", "shapes": shapes, "warnings": []}
            for op, shapes in operators.items()
        ],
        "error": None,
    }


def publish_row(
    *,
    owner,
    suite: SuiteVersion,
    hardware_slug: str = "cpu-dev",
    title: str = "row",
    dsl: str = "triton",
    is_baseline: bool = False,
    **result_options: Any,
) -> Submission:
    """A submission published (or held for review) from ``smoke_results``."""
    return submission_import_results(
        owner=owner,
        report=smoke_results(suite, **result_options),
        suite_version=suite,
        hardware=HardwareProfile.objects.get(slug=hardware_slug),
        title=title,
        provenance_note="made by the tests",
        dsl=dsl,
        is_baseline=is_baseline,
    )
