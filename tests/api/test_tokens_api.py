"""A researcher creates, rotates and revokes their own API token."""

from __future__ import annotations

import base64

import pytest
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery staple"


def _basic(user) -> str:
    return "Basic " + base64.b64encode(f"{user.username}:{PASSWORD}".encode()).decode()


def _me(token: str) -> int:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client.get("/api/submissions/", {"mine": "1"}).status_code


def test_token_from_a_password_then_rotated_then_revoked(user, schema_check):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=_basic(user))
    first = client.post("/api/tokens/")
    assert first.status_code == 201
    schema_check("Token", first.json())
    token = first.json()["token"]
    assert _me(token) == 200
    second = client.post("/api/tokens/").json()["token"]
    assert second != token
    assert _me(token) == 401 and _me(second) == 200
    assert client.delete("/api/tokens/").status_code == 204
    assert _me(second) == 401


def test_token_from_a_browser_session(client, user):
    client.force_login(user)
    response = client.post("/api/tokens/")
    assert response.status_code == 201 and len(response.json()["token"]) == 40


def test_tokens_need_a_login(user):
    client = APIClient()
    assert client.post("/api/tokens/").status_code == 401
    client.credentials(HTTP_AUTHORIZATION="Basic " + base64.b64encode(b"x:wrong").decode())
    response = client.post("/api/tokens/")
    assert response.status_code == 401
    assert response.json()["code"] == "authentication_failed"
