"""The board over the API: the same ranking as the page, paginated, with operator scores."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def test_board_ranks_best_first_across_pages(api, publish, schema_check):
    from tests.factories import UserFactory

    # Three submitters; 0.2 is more than the CPU board's noise floor (50 %) below 0.6 and
    # 0.4 is not.
    for index, fraction in enumerate([0.2, 0.6, 0.4]):
        publish(fraction=fraction, title=f"k{index}", owner=UserFactory())
    first = api.get("/api/leaderboard/", {"suite": "atrex-bench-v0.1", "hardware": "cpu-dev",
                                          "page_size": 2}).json()  # fmt: skip
    schema_check("BoardPage", first)
    assert first["count"] == 3 and first["next"] and first["previous"] is None
    ranks = [(row["rank"], row["tied"], row["title"]) for row in first["results"]]
    assert ranks == [(1, True, "k1"), (1, True, "k2")]
    second = api.get(first["next"]).json()
    assert [(row["rank"], row["tied"], row["title"]) for row in second["results"]] == [
        (3, False, "k0")
    ]
    assert first["view"] == "best" and first["noise_floor"] == pytest.approx(0.5)
    top = first["results"][0]
    assert top["aggregate"] == pytest.approx(0.6)
    assert set(top["operator_scores"]) == set(first["operators"])
    assert all(score == pytest.approx(0.6) for score in top["operator_scores"].values())


def test_board_leaves_out_private_and_unfinished_submissions(api, publish, example_zip, user):
    from submissions import services

    publish(fraction=0.5, title="public")
    publish(fraction=0.9, title="private", visibility="private")
    services.submission_create(owner=user, upload=example_zip("triton-baseline"))  # queued
    rows = api.get("/api/leaderboard/").json()["results"]
    assert [row["title"] for row in rows] == ["public"]


def test_unknown_board_answers_404_with_the_error_body(api, catalogue, schema_check):
    response = api.get("/api/leaderboard/", {"suite": "no-such-suite"})
    assert response.status_code == 404
    body = response.json()
    schema_check("Error", body)
    assert body["code"] == "not_found" and "suite" in body["detail"]
