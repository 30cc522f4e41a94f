"""The API's shared answers served before DRF runs (atrex_site.api.shared.shared_api), in
Redis as in production: a reader with a token, a session or neither costs one round trip
to Redis and no query, and every guarantee of the view's own path holds: a revoked or
expired token is refused at the next request, a log-out counts at once, every request is
counted by the rate limits (once), staff get the answer built for them."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.urls import reverse
from django.utils import timezone
from redis.connection import AbstractConnection
from rest_framework.test import APIClient

from accounts import services
from accounts.services import api_token_create, api_token_revoke
from atrex_site import page_cache
from tests.factories import UserFactory
from tests.leaderboard.results_factory import publish_row

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def in_redis(redis_cache, settings):
    settings.ATREX = {**settings.ATREX, "PUBLIC_PAGE_CACHE_S": 60}
    settings.SESSION_ENGINE = "django.contrib.sessions.backends.cached_db"
    page_cache.forget_readers()
    yield
    page_cache.forget_readers()


@pytest.fixture
def round_trips(monkeypatch):
    """Round trips to Redis (commands or pipelines sent) since the last ``reset()``."""
    counted = {"trips": 0}
    send = AbstractConnection.send_packed_command

    def counting(connection, command, check_health=True):
        counted["trips"] += 1
        return send(connection, command, check_health)

    monkeypatch.setattr(AbstractConnection, "send_packed_command", counting)
    return counted


def _rates(settings, *, anon: str = "1000/min", user: str = "1000/min") -> None:
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"anon": anon, "user": user},
    }


@pytest.fixture
def board_url(catalogue, user):
    publish_row(owner=user, suite=catalogue, title="first row", fraction=0.3)
    return reverse("api:leaderboard") + f"?suite={catalogue.slug}&hardware=cpu-dev"


@pytest.fixture
def compare_url(catalogue, user):
    first = publish_row(owner=user, suite=catalogue, title="slow", fraction=0.2)
    second = publish_row(owner=UserFactory(), suite=catalogue, title="fast", fraction=0.4)
    return reverse("api:compare") + f"?submissions={first.pk},{second.pk}"


def _token_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=user).secret}")
    return client


@pytest.mark.parametrize("endpoint", ["board", "comparison"])
@pytest.mark.parametrize("viewer", ["anonymous", "session", "token"])
def test_a_warm_shared_answer_costs_one_round_trip_and_no_query(
    request, endpoint, viewer, round_trips, django_assert_num_queries
):
    url = request.getfixturevalue("board_url" if endpoint == "board" else "compare_url")
    reader = UserFactory()
    if viewer == "token":
        client = _token_client(reader)
    else:
        client = APIClient()
        if viewer == "session":
            client.force_login(reader)
    first = client.get(url)
    for _ in range(2):  # the copy built, the credential's entry learnt
        client.get(url)
    round_trips["trips"] = 0
    with django_assert_num_queries(0):
        response = client.get(url)
    assert response.status_code == 200 and response["X-Atrex-Cache"] == "hit"
    assert response.json() == first.json()
    assert round_trips["trips"] == 1


def test_a_revoked_token_is_refused_at_the_next_request(board_url, user):
    issued = api_token_create(user=user, name="laptop")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {issued.secret}")
    assert [client.get(board_url)["X-Atrex-Cache"] for _ in range(3)][-1] == "hit"
    api_token_revoke(token=issued.token)
    response = client.get(board_url)
    assert response.status_code == 401 and "X-Atrex-Cache" not in response


def test_an_expired_token_is_refused_at_once(board_url, user, monkeypatch):
    issued = api_token_create(user=user, name="short", expires_in_days=1)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {issued.secret}")
    assert [client.get(board_url)["X-Atrex-Cache"] for _ in range(3)][-1] == "hit"
    later = timezone.now() + timedelta(days=1, seconds=1)
    monkeypatch.setattr(timezone, "now", lambda: later)
    assert client.get(board_url).status_code == 401


def test_a_disabled_account_is_refused_once_its_token_is_read_again(board_url, user):
    secret = api_token_create(user=user, name="ci").secret
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    assert [client.get(board_url)["X-Atrex-Cache"] for _ in range(3)][-1] == "hit"
    get_user_model().objects.filter(pk=user.pk).update(is_active=False)  # the admin, say
    # The token's entry in the cache expires (TOKEN_CACHE_S) and is read from the database.
    cache.delete(services.token_cache_key(services.token_digest(secret)))
    assert client.get(board_url).status_code == 401


def test_every_request_is_counted_once_whether_the_copy_or_the_view_answers(
    board_url, user, settings
):
    _rates(settings, user="6/min")
    client = _token_client(user)
    answered = [client.get(board_url)["X-Atrex-Cache"] for _ in range(4)]
    assert answered[-1] == "hit"  # served before DRF
    page_cache.board_changed()  # the next request finds no fresh copy: the view answers
    assert client.get(board_url)["X-Atrex-Cache"] == "miss"
    assert client.get(board_url)["X-Atrex-Cache"] == "hit"
    refused = client.get(board_url)  # the 7th in the minute
    assert refused.status_code == 429 and 0 < int(refused["Retry-After"]) <= 60
    assert refused.json()["code"] == "throttled"


def test_readers_without_credentials_are_counted_too(board_url, settings):
    _rates(settings, anon="3/min")
    client = APIClient()
    statuses = [client.get(board_url) for _ in range(4)]
    assert [r.status_code for r in statuses] == [200, 200, 200, 429]
    assert statuses[2]["X-Atrex-Cache"] == "hit"


def test_a_log_out_counts_at_once_even_with_the_old_session_cookie(board_url, user, settings):
    """Signed in, the reader is counted as themselves (past their rate: 429); the old cookie
    replayed after the log-out is an anonymous reader's, counted per address."""
    _rates(settings, user="3/min", anon="1000/min")
    client = APIClient()
    client.force_login(user)
    statuses = [client.get(board_url) for _ in range(4)]
    assert [r.status_code for r in statuses] == [200, 200, 200, 429]
    assert statuses[2]["X-Atrex-Cache"] == "hit"
    old_cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
    client.logout()
    client.cookies[settings.SESSION_COOKIE_NAME] = old_cookie
    assert client.get(board_url).status_code == 200


def test_staff_get_the_comparison_built_for_them(compare_url):
    staff = UserFactory(is_staff=True)
    client = _token_client(staff)
    APIClient().get(compare_url)  # the shared copy exists
    for _ in range(3):
        response = client.get(compare_url)
        assert response.status_code == 200 and "X-Atrex-Cache" not in response


def test_a_bad_token_is_refused_though_a_copy_exists(board_url):
    assert APIClient().get(board_url).status_code == 200
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    for _ in range(2):
        response = client.get(board_url)
        assert response.status_code == 401 and "X-Atrex-Cache" not in response
