"""Compare submissions: per-operator scores and deltas, per-shape speedups and status
changes, from one selector for the API and the ``atrex`` client; visibility applies."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from submissions.models import ShapeResult, Submission
from tests.factories import UserFactory
from tests.leaderboard.results_factory import publish_row

pytestmark = pytest.mark.django_db


@pytest.fixture
def pair(catalogue, user):
    slow = publish_row(owner=user, suite=catalogue, title="slow", fraction=0.2)
    fast = publish_row(
        owner=user,
        suite=catalogue,
        title="fast",
        fraction={"rms_norm": 0.4, "silu_and_mul": 0.2, "fused_add_rms_norm": 0.2},
    )
    return slow, fast


def test_compare_gives_deltas_speedups_and_status_changes(pair, user):
    slow, fast = pair
    ShapeResult.objects.filter(run__submission=fast, operator="silu_and_mul").update(
        status="incorrect"
    )
    body = APIClient().get("/api/compare/", {"submissions": f"{slow.pk},{fast.pk}"}).json()
    assert [s["title"] for s in body["submissions"]] == ["slow", "fast"]
    rms = next(op for op in body["operators"] if op["operator"] == "rms_norm")
    assert rms["delta"][str(fast.pk)] == pytest.approx(0.2)
    shape = next(s for s in body["shapes"] if s["operator"] == "rms_norm")
    assert shape["speedup_over_first"][str(fast.pk)] == pytest.approx(2.0)
    silu = [s for s in body["shapes"] if s["operator"] == "silu_and_mul"]
    assert all(s["status_changed"] for s in silu)
    assert body["shapes_changed_status"] == len(silu)


def test_compare_refuses_one_id_bad_ids_and_hidden_submissions(pair):
    slow, fast = pair
    api = APIClient()
    assert api.get("/api/compare/", {"submissions": str(slow.pk)}).status_code == 400
    assert api.get("/api/compare/", {"submissions": "1,x"}).json()["code"] == "compare:bad-ids"
    Submission.objects.filter(pk=fast.pk).update(visibility="private")
    assert api.get("/api/compare/", {"submissions": f"{slow.pk},{fast.pk}"}).status_code == 404
    api.force_authenticate(UserFactory())
    assert api.get("/api/compare/", {"submissions": f"{slow.pk},{fast.pk}"}).status_code == 404
