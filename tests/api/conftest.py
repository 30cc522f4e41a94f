"""Fixtures for the API tests: published rows made fast, and the OpenAPI schema as a
JSON-Schema validator."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from catalogue.models import HardwareProfile, SuiteVersion
from submissions.models import Submission
from submissions.result_import import submission_import_results


def results_for(suite: SuiteVersion, *, fraction: float, status: str = "pass") -> dict[str, Any]:
    """An ``atrex-results/1`` report in which every shape of ``suite`` has ``status`` and
    reaches ``fraction`` of the roofline."""
    by_operator: dict[str, list[dict[str, Any]]] = {}
    for shape in suite.definition["shapes"]:
        by_operator.setdefault(shape["operator"], []).append(
            {
                "shape_id": shape["shape_id"],
                "weight": shape["weight"],
                "status": status,
                "time_ms": 1.0,
                "time_spread_ms": 0.01,
                "reps": 10,
                "reference_time_ms": 2.0,
                "t_sol_ms": fraction,
                "roofline_fraction": fraction,
                "speedup": 2.0,
                "own_kernel_share": 1.0,
                "max_abs_error": 0.0,
                "error": None,
            }
        )
    return {
        "schema": "atrex-results/1",
        "harness_version": "test",
        "suite": {"name": suite.name, "version": suite.version},
        "environment": {"device_name": "test device", "hostname": "test"},
        "operators": [
            {"operator": op, "status": "ok", "shapes": shapes, "warnings": []}
            for op, shapes in by_operator.items()
        ],
        "error": None,
    }


@pytest.fixture
def publish(catalogue, user) -> Callable[..., Submission]:
    """``publish(fraction=0.5, title="x", owner=..., visibility=...)`` -> a published
    submission on (atrex-bench-v0.1, cpu-dev)."""
    cpu = HardwareProfile.objects.get(slug="cpu-dev")

    def make(
        *, fraction: float, title: str = "kernels", owner=None, visibility: str = "public"
    ) -> Submission:
        submission = submission_import_results(
            owner=owner or user,
            report=results_for(catalogue, fraction=fraction),
            suite_version=catalogue,
            hardware=cpu,
            title=title,
            provenance_note="test",
            is_baseline=False,
        )
        if visibility != "public":
            Submission.objects.filter(pk=submission.pk).update(visibility=visibility)
            submission.refresh_from_db()
        return submission

    return make


@pytest.fixture
def api() -> APIClient:
    return APIClient()


def _json_schema(node: Any) -> Any:
    """OpenAPI 3.0 -> JSON Schema: ``nullable`` becomes a union with null, and objects with
    declared properties refuse undeclared ones (so an undocumented field fails a test)."""
    if isinstance(node, list):
        return [_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _json_schema(value) for key, value in node.items()}
    if "properties" in node and node.get("type") == "object":
        node.setdefault("additionalProperties", False)
    if node.pop("nullable", False):
        return {"anyOf": [node, {"type": "null"}]}
    return node


@pytest.fixture
def schema_check(db) -> Callable[[str, Any], None]:
    """``schema_check("BoardPage", body)`` fails when ``body`` does not match the component
    of that name in the served ``/api/schema/``."""
    import jsonschema

    response = APIClient().get("/api/schema/?format=json")
    assert response.status_code == 200
    document = _json_schema(copy.deepcopy(response.json()))

    def check(component: str, body: Any) -> None:
        assert component in document["components"]["schemas"], component
        validator = jsonschema.Draft202012Validator(
            {"$ref": f"#/components/schemas/{component}", "components": document["components"]}
        )
        errors = sorted(validator.iter_errors(body), key=lambda e: list(e.path))
        assert not errors, "; ".join(f"{list(e.path)}: {e.message}" for e in errors[:5])

    return check
