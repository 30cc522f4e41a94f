"""Suites and hardware profiles: published versions only, public shapes only."""

from __future__ import annotations

import pytest

from catalogue.models import Shape

pytestmark = pytest.mark.django_db


def test_suites_list_and_detail_with_operators(api, catalogue, schema_check):
    listing = api.get("/api/suites/").json()
    schema_check("PaginatedSuiteVersionList", listing)
    assert [row["slug"] for row in listing["results"]] == ["atrex-bench-v0.1"]
    detail = api.get("/api/suites/atrex-bench-v0.1/").json()
    schema_check("SuiteVersionDetail", detail)
    importance = [row["importance"] for row in detail["operators"]]
    assert importance == sorted(importance, reverse=True) and len(importance) >= 3
    assert detail["public_shapes"] == catalogue.shapes.count()


def test_hidden_shapes_are_never_listed(api, catalogue, schema_check):
    hidden = catalogue.shapes.order_by("pk").first()
    Shape.objects.filter(pk=hidden.pk).update(visibility=Shape.Visibility.HIDDEN)
    shapes = api.get(
        "/api/suites/atrex-bench-v0.1/shapes/",
        {"operator": hidden.operator.slug, "page_size": 200},
    ).json()
    schema_check("PaginatedShapeList", shapes)
    listed = {row["shape_id"] for row in shapes["results"]}
    assert hidden.shape_id not in listed and listed
    assert {row["operator"] for row in shapes["results"]} == {hidden.operator.slug}
    detail = api.get("/api/suites/atrex-bench-v0.1/").json()
    assert detail["public_shapes"] == catalogue.shapes.count() - 1


def test_unknown_suite_is_404(api, catalogue):
    response = api.get("/api/suites/nope-v9/")
    assert response.status_code == 404
    assert response.json() == {"detail": "Not found.", "code": "not_found"}


def test_hardware_profiles(api, catalogue, schema_check):
    listing = api.get("/api/hardware/").json()
    schema_check("PaginatedHardwareProfileList", listing)
    slugs = {row["slug"] for row in listing["results"]}
    assert {"h200-sxm", "h100-sxm", "cpu-dev"} <= slugs
    h200 = api.get("/api/hardware/h200-sxm/").json()
    schema_check("HardwareProfile", h200)
    assert h200["hbm_bytes_per_s"] == pytest.approx(4.8e12)
