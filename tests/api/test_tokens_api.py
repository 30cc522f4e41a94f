"""A researcher's named API tokens: created (shown once), listed, used, revoked; only a
digest is stored."""

from __future__ import annotations

import base64
import hashlib
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import ApiToken
from accounts.services import api_token_create
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery staple"


def _basic(user, password: str = PASSWORD) -> str:
    return "Basic " + base64.b64encode(f"{user.username}:{password}".encode()).decode()


def _with_token(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


def _me(token: str) -> int:
    return _with_token(token).get("/api/submissions/", {"mine": "1"}).status_code


def test_token_from_a_password_is_shown_once_and_only_its_digest_is_stored(user, schema_check):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=_basic(user))
    response = client.post("/api/tokens/", {"name": "gpu node"}, format="json")
    assert response.status_code == 201
    assert response["Cache-Control"] == "no-store"
    body = response.json()
    schema_check("ApiTokenCreated", body)
    secret = body["token"]
    assert body["name"] == "gpu node" and secret.startswith(body["prefix"])
    stored = ApiToken.objects.get(pk=body["id"])
    assert stored.digest == hashlib.sha256(secret.encode()).hexdigest()
    # The secret is nowhere in the row.
    assert all(secret not in str(value) for value in stored.__dict__.values())
    assert _me(secret) == 200
    listed = client.get("/api/tokens/").json()
    schema_check("PaginatedApiTokenList", listed)
    assert [row["name"] for row in listed["results"]] == ["gpu node"]
    assert secret not in str(listed)


def test_several_named_tokens_each_revoked_on_its_own(user):
    laptop = api_token_create(user=user, name="laptop").secret
    cluster = api_token_create(user=user, name="cluster").secret
    assert _me(laptop) == 200 and _me(cluster) == 200
    # DELETE /api/tokens/ revokes the token the request is made with, and only that one.
    assert _with_token(laptop).delete("/api/tokens/").status_code == 204
    assert _me(laptop) == 401 and _me(cluster) == 200
    cluster_id = ApiToken.objects.get(name="cluster").pk
    assert _with_token(cluster).delete(f"/api/tokens/{cluster_id}/").status_code == 204
    assert _me(cluster) == 401
    # Revoked rows are kept for the record, never accepted again.
    assert ApiToken.objects.filter(user=user, revoked_at__isnull=False).count() == 2


def test_a_name_in_use_is_refused_with_the_reason(user):
    client = APIClient()
    client.force_authenticate(user)
    assert client.post("/api/tokens/", {"name": "ci"}, format="json").status_code == 201
    response = client.post("/api/tokens/", {"name": "ci"}, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "duplicate_name" and "'ci'" in response.json()["detail"]


def test_someone_elses_token_cannot_be_listed_or_revoked(user):
    theirs = api_token_create(user=UserFactory(), name="theirs").token
    mine = api_token_create(user=user, name="mine").secret
    client = _with_token(mine)
    assert [row["name"] for row in client.get("/api/tokens/").json()["results"]] == ["mine"]
    assert client.delete(f"/api/tokens/{theirs.pk}/").status_code == 404
    theirs.refresh_from_db()
    assert theirs.revoked_at is None


def test_last_use_is_recorded(user):
    issued = api_token_create(user=user, name="used")
    assert issued.token.last_used_at is None
    before = timezone.now()
    assert _me(issued.secret) == 200
    issued.token.refresh_from_db()
    assert issued.token.last_used_at is not None and issued.token.last_used_at >= before


def test_an_expired_token_is_refused(user, monkeypatch):
    issued = api_token_create(user=user, name="short", expires_in_days=1)
    assert _me(issued.secret) == 200
    later = timezone.now() + timedelta(days=1, seconds=1)  # the day passes
    monkeypatch.setattr(timezone, "now", lambda: later)
    response = _with_token(issued.secret).get("/api/submissions/")
    assert response.status_code == 401 and "expired" in response.json()["detail"]


def test_token_from_a_browser_session(client, user):
    client.force_login(user)
    response = client.post("/api/tokens/")
    assert response.status_code == 201
    assert response.json()["token"].startswith("atx_")


def test_revoking_without_a_token_names_the_way(client, user):
    client.force_login(user)
    response = client.delete("/api/tokens/")
    assert response.status_code == 400 and "/api/tokens/{id}/" in response.json()["detail"]


def test_tokens_need_a_login(user):
    client = APIClient()
    assert client.post("/api/tokens/").status_code == 401
    client.credentials(HTTP_AUTHORIZATION="Basic " + base64.b64encode(b"x:wrong").decode())
    response = client.post("/api/tokens/")
    assert response.status_code == 401
    assert response.json()["code"] == "authentication_failed"
