"""Nothing of a submission held for review is shown to anyone but its owner and staff: not
on its page, not in its downloads, not on the compare page or its API, not on the operator
page's best results nor in the history (docs/decisions.md 12). Django's test client, the
four readers each surface has: anonymous, another user, the owner, staff."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from catalogue.models import Shape
from submissions.models import ShapeResult, Submission
from tests.factories import UserFactory
from tests.leaderboard.results_factory import publish_row

pytestmark = pytest.mark.django_db

CPU = {"suite": "atrex-bench-v0.1", "hardware": "cpu-dev"}
READERS = ("anonymous", "other", "owner", "staff")
SEES = {"anonymous": False, "other": False, "owner": True, "staff": True}


@pytest.fixture
def held(catalogue, user):
    """Held for review: each of its passes claims 300% of the roofline (``above_roofline``)."""
    submission = publish_row(owner=user, suite=catalogue, title="too good", fraction=3.0)
    assert submission.status == Submission.Status.HELD_FOR_REVIEW
    return submission


@pytest.fixture
def honest(catalogue):
    return publish_row(owner=UserFactory(), suite=catalogue, title="honest", fraction=0.4)


def _as(client, reader: str, owner):
    if reader == "other":
        client.force_login(UserFactory())
    elif reader == "owner":
        client.force_login(owner)
    elif reader == "staff":
        client.force_login(UserFactory(is_staff=True))
    return client


@pytest.mark.parametrize("reader", READERS)
def test_the_submission_page_shows_a_held_submissions_results_to_its_owner_and_staff_only(
    client, held, reader
):
    html = (
        _as(client, reader, held.owner)
        .get(reverse("submissions:detail", args=[held.pk]))
        .content.decode()
    )
    assert "Held for review" in html  # its status is no secret
    shown = {
        "headline": 'id="headline-score"' in html,
        "figures": 'id="aggregate"' in html,
        "tables": 'id="operator-table"' in html,
        "roofline": 'id="roofline-figure"' in html,
        "downloads": 'id="results-csv"' in html,
        "compare link": 'id="compare-with"' in html,
        "figure": "300%" in html,
        "environment": 'id="environment-list"' in html,
        # The hold's note names the shapes and the sign an admin reviews.
        "hold note": "above_roofline" in html,
    }
    assert shown == dict.fromkeys(shown, SEES[reader]), shown
    assert ('id="withheld-note"' in html) is not SEES[reader]


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_a_held_submissions_downloads_are_for_its_owner_and_staff(client, held, reader, fmt):
    response = _as(client, reader, held.owner).get(
        reverse("submissions:results-download", args=[held.pk, fmt])
    )
    if SEES[reader]:
        assert response.status_code == 200 and b"rms_norm" in response.content
    else:
        assert response.status_code == 403
        text = response.content.decode()
        assert f"Submission #{held.pk} is held for review" in text and "rms_norm" not in text


@pytest.mark.parametrize("reader", READERS)
def test_the_api_gives_no_aggregate_environment_or_hold_note_of_a_held_submission(
    client, held, reader
):
    # A held re-run of a submission published before keeps its old score row.
    publish_row(owner=held.owner, suite=held.suite_version, title="earlier", fraction=0.3)
    earlier = Submission.objects.get(title="earlier")
    Submission.objects.filter(pk=earlier.pk).update(status=Submission.Status.HELD_FOR_REVIEW)
    api = _as(client, reader, held.owner)
    detail = api.get(reverse("api:submission", args=[earlier.pk])).json()
    assert (detail["aggregate"] is not None) is SEES[reader]
    held_detail = api.get(reverse("api:submission", args=[held.pk])).json()
    assert bool(held_detail["environment"]) is SEES[reader]
    notes = " ".join(change["note"] for change in held_detail["history"])
    assert ("above_roofline" in notes) is SEES[reader]


@pytest.mark.parametrize("reader", READERS)
def test_a_held_submission_is_compared_by_its_owner_and_staff_only(client, held, honest, reader):
    _as(client, reader, held.owner)
    query = {"submissions": f"{honest.pk},{held.pk}"}
    api = client.get("/api/compare/", query)
    page = client.get(reverse("leaderboard:compare"), query)
    if SEES[reader]:
        assert api.status_code == 200 and page.status_code == 200
        assert [s["id"] for s in api.json()["submissions"]] == [honest.pk, held.pk]
    else:
        assert api.status_code == 400 and api.json()["code"] == "compare:held"
        message = api.json()["detail"]
        assert f"#{held.pk} is held for review" in message and "cannot be compared" in message
        html = page.content.decode()
        assert page.status_code == 400 and f"#{held.pk} is held for review" in html
        assert "300%" not in html


@pytest.mark.parametrize("reader", READERS)
def test_a_held_submission_is_not_among_the_operator_pages_best_nor_in_the_history(
    client, catalogue, honest, reader
):
    # Published first (it has a score row), then held after a re-run.
    fast = publish_row(owner=honest.owner, suite=catalogue, title="fast then held", fraction=0.9)
    _as(client, reader, fast.owner)

    def pages() -> str:
        operator = client.get(reverse("leaderboard:operator", args=["rms_norm"]), CPU)
        history = client.get(reverse("leaderboard:history"), CPU)
        return operator.content.decode() + history.content.decode()

    assert "fast then held" in pages()  # while published: the best of every shape
    Submission.objects.filter(pk=fast.pk).update(status=Submission.Status.HELD_FOR_REVIEW)
    assert "fast then held" not in pages() and "honest" in pages()


def test_the_comparison_looks_the_hidden_shapes_up_once_for_all_its_submissions(
    client, catalogue, user
):
    rows = [publish_row(owner=user, suite=catalogue, title=f"r{i}", fraction=0.3) for i in range(4)]

    def shape_lookups(count: int) -> int:
        ids = ",".join(str(row.pk) for row in rows[:count])
        with CaptureQueriesContext(connection) as captured:
            assert client.get("/api/compare/", {"submissions": ids}).status_code == 200
        tables = (Shape._meta.db_table, ShapeResult._meta.db_table)
        return sum(f'FROM "{table}"' in query["sql"] for query in captured for table in tables)

    assert shape_lookups(2) == shape_lookups(4) == 2
