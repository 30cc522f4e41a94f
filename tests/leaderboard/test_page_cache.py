"""The anonymous readers' page copies: served from the cache and retired by every change
(tests/atrex_site/test_shared_pages.py: the same copies for signed-in readers and tokens)."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.urls import reverse

from atrex_site import page_cache
from submissions.curation import submission_flag_set
from submissions.models import Score, Submission
from submissions.scores import scores_refresh_compile_speedup
from tests.factories import UserFactory
from tests.leaderboard.results_factory import publish_row

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def anonymous_copies_on(settings):
    settings.ATREX = {**settings.ATREX, "PUBLIC_PAGE_CACHE_S": 60}
    cache.clear()
    page_cache.forget_readers()
    yield
    cache.clear()
    page_cache.forget_readers()


def _board(client, **extra):
    return client.get(reverse("leaderboard:board"), **extra)


def test_a_second_anonymous_read_comes_from_the_cache_without_sql(
    client, catalogue, user, django_assert_num_queries
):
    publish_row(owner=user, suite=catalogue, title="first row", fraction=0.3)
    first = _board(client)
    assert first.status_code == 200 and first["X-Atrex-Cache"] == "miss"
    with django_assert_num_queries(0):
        second = _board(client)
    assert second["X-Atrex-Cache"] == "hit"
    assert second.content == first.content
    assert second["Content-Type"] == first["Content-Type"]


def test_a_new_score_and_a_curation_action_retire_the_copies(client, catalogue, user):
    publish_row(owner=user, suite=catalogue, title="first row", fraction=0.3)
    assert b"first row" in _board(client).content
    publish_row(owner=UserFactory(), suite=catalogue, title="second row", fraction=0.5)
    page = _board(client)
    assert page["X-Atrex-Cache"] == "miss" and b"second row" in page.content
    staff = UserFactory(is_staff=True)
    second = Submission.objects.get(title="second row")
    submission_flag_set(submission=second, actor=staff, action="hide", reason="test")
    page = _board(client)
    assert page["X-Atrex-Cache"] == "miss" and b"second row" not in page.content


def test_a_bulk_refresh_of_the_compile_speedups_retires_the_copies(client, catalogue, user):
    """``scores_refresh_compile_speedup`` writes with update() (no post_save); the board
    still hears of it through ``submissions.scores.scores_changed``."""
    publish_row(owner=user, suite=catalogue, title="first row", fraction=0.3)
    assert _board(client)["X-Atrex-Cache"] == "miss"
    Score.objects.update(geomean_speedup_compile=2.0)  # stale, and no signal sent
    assert _board(client)["X-Atrex-Cache"] == "hit"
    score = Score.objects.get()
    refreshed = scores_refresh_compile_speedup(
        suite_version_id=score.suite_version_id, hardware_id=score.hardware_id
    )
    assert refreshed == 1  # no torch.compile baseline: the stale figure is cleared
    assert _board(client)["X-Atrex-Cache"] == "miss"


def test_the_api_list_is_cached_and_retired_too(client, catalogue, user):
    url = reverse("api:leaderboard") + f"?suite={catalogue.slug}&hardware=cpu-dev"
    publish_row(owner=user, suite=catalogue, title="first row", fraction=0.3)
    assert client.get(url)["X-Atrex-Cache"] == "miss"
    assert client.get(url)["X-Atrex-Cache"] == "hit"
    Score.objects.get(submission__title="first row").delete()
    response = client.get(url)
    assert response["X-Atrex-Cache"] == "miss" and response.json()["count"] == 0


def test_an_api_request_with_a_token_runs_the_view(client, catalogue, user):
    """The API list's whole-response copy is for readers without credentials: a token is
    checked first (a bad one answers 401, never the copy)."""
    url = reverse("api:leaderboard") + f"?suite={catalogue.slug}&hardware=cpu-dev"
    publish_row(owner=user, suite=catalogue, title="first row", fraction=0.3)
    assert client.get(url)["X-Atrex-Cache"] == "miss"  # an anonymous copy now exists
    api = client.get(url, HTTP_AUTHORIZATION="Token not-a-real-token")
    assert api.status_code == 401 and "X-Atrex-Cache" not in api


def test_a_public_submission_page_is_cached_and_a_private_one_never(client, catalogue, user):
    public = publish_row(owner=user, suite=catalogue, title="public row", fraction=0.3)
    url = reverse("submissions:detail", args=[public.pk])
    assert client.get(url)["X-Atrex-Cache"] == "miss"
    assert client.get(url)["X-Atrex-Cache"] == "hit"
    private = publish_row(owner=user, suite=catalogue, title="private row", fraction=0.2)
    Submission.objects.filter(pk=private.pk).update(visibility="private")
    private_url = reverse("submissions:detail", args=[private.pk])
    for _ in range(2):
        response = client.get(private_url)
        assert response.status_code == 404 and "X-Atrex-Cache" not in response
    client.force_login(user)  # the owner sees it, never from the cache
    response = client.get(private_url)
    assert response.status_code == 200 and "X-Atrex-Cache" not in response
