"""The API's rate limits (atrex_site/api/throttling.py), counted in Redis in one round trip
as in production and by DRF in the memory cache: past the rate the API answers 429 with
Retry-After; refused requests are not counted, so a client that waits that long gets in;
requests at the same moment never pass more than the rate."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.cache import cache
from rest_framework.test import APIClient

from accounts.services import api_token_create
from atrex_site.api.throttling import AnonThrottle
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(params=["memory", "redis"])
def shared_cache(request):
    if request.param == "redis":
        yield request.getfixturevalue("redis_cache")
        return
    cache.clear()
    yield cache
    cache.clear()


def _rates(settings, *, anon: str, user: str) -> None:
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"anon": anon, "user": user},
    }


def test_past_the_rate_the_api_answers_429_with_retry_after(shared_cache, catalogue, settings):
    _rates(settings, anon="3/min", user="5/min")
    client = APIClient()
    assert [client.get("/api/suites/").status_code for _ in range(4)] == [200, 200, 200, 429]
    response = client.get("/api/suites/")
    assert response.status_code == 429 and 0 < int(response["Retry-After"]) <= 60
    assert response.json()["code"] == "throttled"
    # A token's user has their own allowance, from the same address.
    secret = api_token_create(user=UserFactory(), name="ci").secret
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    assert [client.get("/api/suites/").status_code for _ in range(6)] == [200] * 5 + [429]


def test_a_client_that_waits_as_told_gets_in(shared_cache, catalogue, settings):
    _rates(settings, anon="2/s", user="100/min")
    client = APIClient()
    assert [client.get("/api/suites/").status_code for _ in range(2)] == [200, 200]
    refused = [client.get("/api/suites/") for _ in range(3)]  # not counted
    assert [r.status_code for r in refused] == [429] * 3
    time.sleep(int(refused[-1]["Retry-After"]) + 0.05)
    assert client.get("/api/suites/").status_code == 200


def test_requests_at_the_same_moment_never_pass_more_than_the_rate(redis_cache, settings):
    _rates(settings, anon="10/min", user="100/min")
    request = SimpleNamespace(user=AnonymousUser(), META={"REMOTE_ADDR": "192.0.2.7"}, headers={})
    start = threading.Barrier(30)
    allowed: list[bool] = []

    def one() -> None:
        throttle = AnonThrottle()
        start.wait()
        allowed.append(throttle.allow_request(request, None))

    threads = [threading.Thread(target=one) for _ in range(30)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert allowed.count(True) == 10
