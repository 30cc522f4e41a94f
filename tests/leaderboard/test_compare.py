"""Compare submissions: per-operator scores and deltas, per-shape speedups and status
changes, from one selector for the API and the ``atrex`` client; visibility applies."""

from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from catalogue.models import SuiteVersion
from leaderboard.templatetags.figures import percent, sig
from submissions.models import ShapeResult, Submission
from tests.factories import UserFactory
from tests.leaderboard.results_factory import publish_row

pytestmark = pytest.mark.django_db

CPU = {"suite": "atrex-bench-v0.1", "hardware": "cpu-dev"}


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


# ------------------------------------------------------------------ the page


def _compare_page(client, ids, **params):
    return client.get(
        reverse("leaderboard:compare"),
        {"submissions": ",".join(str(pk) for pk in ids), **params},
    )


def _api(ids, user=None):
    api = APIClient()
    if user is not None:
        api.force_authenticate(user)
    return api.get("/api/compare/", {"submissions": ",".join(str(pk) for pk in ids)}).json()


@pytest.fixture
def trio(catalogue, user):
    """A reference, a faster row whose silu_and_mul turned incorrect, and a baseline whose
    every shape is a (correct, slower) fallback."""
    slow = publish_row(owner=user, suite=catalogue, title="slow", fraction=0.2)
    fast = publish_row(
        owner=user,
        suite=catalogue,
        title="fast",
        fraction={"rms_norm": 0.4, "silu_and_mul": 0.2, "fused_add_rms_norm": 0.3},
        status={"silu_and_mul": "incorrect"},
    )
    eager = publish_row(
        owner=user,
        suite=catalogue,
        title="eager",
        dsl="pytorch",
        fraction=0.1,
        status="fallback",
        is_baseline=True,
    )
    return slow, fast, eager


def test_page_shows_the_apis_figures_for_the_same_ids(client, trio):
    slow, fast, _ = trio
    response = _compare_page(client, [slow.pk, fast.pk])
    assert response.status_code == 200
    # One computation: the page's figures are the API's JSON (its keys are strings).
    page_body = json.loads(json.dumps(response.context["body"]))
    assert page_body == _api([slow.pk, fast.pk])
    html = response.content.decode()
    operators = html.split('id="compare-operators"', 1)[1].split("</table>", 1)[0]
    rms = operators.split(">rms_norm</a>", 1)[1].split("</tr>", 1)[0]
    cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", rms)]
    # importance, #slow's score, #fast's score, Δ in percentage points, speed-up
    assert cells[2:] == [percent(0.4), "+20.0 pt", sig(2.0) + "×"]
    api_rms = next(op for op in page_body["operators"] if op["operator"] == "rms_norm")
    assert api_rms["speedup_over_first"][str(fast.pk)] == pytest.approx(2.0)
    assert api_rms["delta"][str(fast.pk)] == pytest.approx(0.2)
    assert 'id="speedup-figure"' in html and 'id="scores-figure"' in html
    # silu_and_mul's shapes went pass -> incorrect, and say so.
    silu = html.split('id="shapes-silu_and_mul"', 1)[1].split("</tbody>", 1)[0]
    assert silu.count('class="changed"') == 3 and "pass →" in silu


def test_three_submissions_each_measured_against_the_first(client, trio):
    slow, fast, eager = trio
    response = _compare_page(client, [slow.pk, fast.pk, eager.pk])
    assert response.status_code == 200
    body = response.context["body"]
    assert [s["id"] for s in body["submissions"]] == [slow.pk, fast.pk, eager.pk]
    assert body["submissions"][1]["speedup_over_first"] > 1.0  # fast: faster than slow
    assert body["submissions"][2]["speedup_over_first"] == pytest.approx(0.5)  # eager: 2x slower
    figure = response.context["speedup_chart"]
    # Drawn last to first, so that the first series is each group's top bar.
    assert [trace["name"] for trace in figure["data"]] == [f"#{eager.pk} eager", f"#{fast.pk} fast"]
    html = response.content.decode()
    assert html.count('scope="colgroup"') == 3  # #slow, then score/Δ/speed-up for each other


def test_a_submission_against_a_baseline(client, trio):
    slow, _, eager = trio
    response = _compare_page(client, [eager.pk, slow.pk])
    body = response.context["body"]
    assert body["submissions"][0]["is_baseline"] is True
    # The baseline's shapes are correct fallbacks: speed-ups count them; every shape's
    # status differs (fallback -> pass).
    assert body["submissions"][1]["speedup_over_first"] == pytest.approx(2.0)
    assert body["shapes_changed_status"] == len(body["shapes"]) > 0
    assert "fallback →" in response.content.decode()


def test_changed_only_shows_the_shapes_whose_status_changed(client, trio):
    slow, fast, _ = trio
    everything = _compare_page(client, [slow.pk, fast.pk]).content.decode()
    changed = _compare_page(client, [slow.pk, fast.pk], changed="1").content.decode()
    assert everything.count('<tbody id="shapes-') == 3
    shapes = changed.split('id="compare-shapes"', 1)[1].split("</table>", 1)[0]
    assert re.findall(r'<tbody id="shapes-([a-z_]+)"', shapes) == ["silu_and_mul"]
    assert shapes.count('<tr class="changed">') == 3
    assert "Show all" in changed and 'id="changed-only"' in everything


def test_bad_input_says_what_to_fix(client, trio, catalogue, user):
    slow, fast, _ = trio
    page = reverse("leaderboard:compare")

    def error(response) -> str:
        return re.sub(
            r"\s+", " ", response.content.decode().split('id="compare-error"', 1)[1]
        ).split("</div>", 1)[0]

    response = client.get(page, {"submissions": "12, x"})
    assert response.status_code == 400 and "“x” is not a submission id" in error(response)
    # One id (the submission page's link) is a start: the form asks for one more.
    response = client.get(page, {"submissions": str(slow.pk)})
    assert response.status_code == 200 and f"#{slow.pk} and one more" in error(response)
    assert 'id="compare-candidates"' in response.content.decode()
    response = client.get(page, {"submissions": f"{slow.pk},999999"})
    assert response.status_code == 404 and "no submission #999999 that you can see" in error(
        response
    )
    hidden = publish_row(owner=UserFactory(), suite=catalogue, title="Secret-Title")
    Submission.objects.filter(pk=hidden.pk).update(visibility="private")
    response = client.get(page, {"submissions": f"{slow.pk},{hidden.pk}"})
    assert response.status_code == 404 and f"#{hidden.pk} that you can see" in error(response)
    assert b"Secret-Title" not in response.content
    running = publish_row(owner=UserFactory(), suite=catalogue, title="running")
    Submission.objects.filter(pk=running.pk).update(status="running")
    response = client.get(page, {"submissions": f"{slow.pk},{running.pk}"})
    assert response.status_code == 400 and "is not published (running)" in error(response)
    client.force_login(running.owner)  # one's own unpublished submission may be compared
    assert client.get(page, {"submissions": f"{slow.pk},{running.pk}"}).status_code == 200
    client.logout()
    gpu = publish_row(owner=user, suite=catalogue, title="gpu", hardware_slug="h200-sxm")
    response = client.get(page, {"submissions": f"{slow.pk},{gpu.pk}"})
    assert response.status_code == 400 and "pick submissions of one hardware profile" in error(
        response
    )
    other = SuiteVersion.objects.create(
        name="atrex-bench", version="v0.1-copy", content_hash="copy", definition={}
    )
    Submission.objects.filter(pk=fast.pk).update(suite_version=other)
    response = client.get(page, {"submissions": f"{slow.pk},{fast.pk}"})
    assert response.status_code == 400 and "compare submissions of one suite version" in error(
        response
    )
    response = client.get(page, {"submissions": ",".join(str(n) for n in range(1, 10))})
    assert response.status_code == 400 and "at most 8" in error(response)
    # The API says the same, with a stable code.
    body = APIClient().get("/api/compare/", {"submissions": f"{slow.pk},{gpu.pk}"}).json()
    assert body["code"] == "compare:not-comparable" and "one hardware profile" in body["detail"]


def test_the_board_and_the_submission_page_link_to_the_comparison(client, trio):
    slow, fast, _ = trio
    # Every submission (one owner has all three: the default view shows only their best).
    board = client.get(reverse("leaderboard:board"), {**CPU, "view": "all"}).content.decode()
    boxes = re.findall(r'name="submissions" value="(\d+)" form="compare-pick"', board)
    assert {int(pk) for pk in boxes} == {s.pk for s in trio}
    assert 'id="compare-pick"' in board and reverse("leaderboard:compare") in board
    detail = client.get(reverse("submissions:detail", args=[fast.pk])).content.decode()
    assert f'{reverse("leaderboard:compare")}?submissions={fast.pk}" id="compare-with"' in detail
