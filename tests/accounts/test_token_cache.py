"""API tokens kept in the shared cache (accounts.services): a kept token costs no query,
and the refusals still come at once: a token revoked (through the API, the tokens page or
the admin), one whose expiry passes while it is kept, one whose revoke races its first use;
a disabled account within TOKEN_CACHE_S. In the per-process memory cache of the tests and
in Redis, as in production."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from accounts import services
from accounts.models import ApiToken
from accounts.services import api_token_authenticate, api_token_create, api_token_revoke
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


def _quota(secret: str) -> int:
    """The status of a read that needs a signed-in user, made with the token."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    return client.get("/api/quota/").status_code


def test_a_kept_token_costs_no_query(shared_cache, user, django_assert_num_queries):
    secret = api_token_create(user=user, name="ci").secret
    assert _quota(secret) == 200  # read from the database, then kept
    with django_assert_num_queries(0):
        token = api_token_authenticate(secret=secret)
    assert token is not None and token.user == user


@pytest.mark.parametrize("how", ["api", "tokens page", "admin"])
def test_a_revoked_token_is_refused_at_the_next_request(shared_cache, user, client, how):
    issued = api_token_create(user=user, name="laptop")
    assert _quota(issued.secret) == 200
    assert api_token_authenticate(secret=issued.secret) is not None  # kept in the cache
    if how == "api":
        revoker = APIClient()
        revoker.credentials(HTTP_AUTHORIZATION=f"Token {issued.secret}")
        assert revoker.delete("/api/tokens/").status_code == 204
    elif how == "tokens page":
        client.force_login(user)
        response = client.post(reverse("accounts:token-revoke", args=[issued.token.pk]))
        assert response.status_code == 302
    else:
        client.force_login(UserFactory(is_staff=True, is_superuser=True))
        response = client.post(
            reverse("admin:accounts_apitoken_changelist"),
            {"action": "revoke", "_selected_action": [issued.token.pk]},
        )
        assert response.status_code == 302
    assert ApiToken.objects.get(pk=issued.token.pk).revoked_at is not None
    assert _quota(issued.secret) == 401


def test_a_first_use_racing_the_revoke_cannot_keep_the_token(shared_cache, user):
    """A request that read the token just before the revoke stores it just after: the
    revoke's mark stays, and the next request is refused."""
    issued = api_token_create(user=user, name="racing")
    read_before = ApiToken.objects.select_related("user").get(pk=issued.token.pk)
    api_token_revoke(token=issued.token)
    services._keep(issued.token.digest, read_before)
    assert api_token_authenticate(secret=issued.secret) is None
    assert _quota(issued.secret) == 401


def test_an_expiry_passing_while_the_token_is_kept_refuses_it_at_once(
    shared_cache, user, monkeypatch
):
    issued = api_token_create(user=user, name="short", expires_in_days=1)
    assert _quota(issued.secret) == 200
    later = timezone.now() + timedelta(days=1, seconds=1)
    monkeypatch.setattr(timezone, "now", lambda: later)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {issued.secret}")
    response = client.get("/api/quota/")
    assert response.status_code == 401 and "expired" in response.json()["detail"]


def test_a_disabled_account_is_refused_within_the_cache_time(shared_cache, user, monkeypatch):
    monkeypatch.setattr(services, "TOKEN_CACHE_S", 1)
    secret = api_token_create(user=user, name="ci").secret
    assert _quota(secret) == 200
    get_user_model().objects.filter(pk=user.pk).update(is_active=False)  # the admin, say
    time.sleep(1.2)
    assert _quota(secret) == 401
