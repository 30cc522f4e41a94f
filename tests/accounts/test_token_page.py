"""The API tokens page: a new token is shown once, listed by name and prefix only, and
revoked with a button."""

from __future__ import annotations

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from accounts.models import ApiToken
from accounts.services import api_token_create
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def _works(secret: str) -> bool:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    return client.get("/api/tokens/").status_code == 200


def test_a_new_token_is_shown_once_then_only_its_prefix(client, user):
    client.force_login(user)
    response = client.post(reverse("accounts:tokens"), {"name": "laptop"})
    assert response.status_code == 200 and response["Cache-Control"] == "no-store"
    token = ApiToken.objects.get(user=user, name="laptop")
    html = response.content.decode()
    secret = html.split('<pre class="token">')[1].split("</pre>")[0]
    assert secret.startswith(token.prefix) and _works(secret)
    again = client.get(reverse("accounts:tokens")).content.decode()
    assert secret not in again and token.prefix in again and "laptop" in again


def test_a_name_in_use_is_refused_on_the_page(client, user):
    api_token_create(user=user, name="ci")
    client.force_login(user)
    response = client.post(reverse("accounts:tokens"), {"name": "ci"})
    assert response.status_code == 400
    assert "already have an active token named" in response.content.decode()
    assert ApiToken.objects.filter(user=user).count() == 1


def test_revoking_from_the_page(client, user):
    issued = api_token_create(user=user, name="old")
    client.force_login(user)
    response = client.post(reverse("accounts:token-revoke", args=[issued.token.pk]))
    assert response.status_code == 302
    assert not _works(issued.secret)
    page = client.get(reverse("accounts:tokens")).content.decode()
    assert "<td>old</td>" not in page and "You have no active token." in page
    assert "Token &#x27;old&#x27;" in page  # the message saying it was revoked


def test_another_users_token_cannot_be_revoked(client, user):
    theirs = api_token_create(user=UserFactory(), name="theirs")
    client.force_login(user)
    response = client.post(reverse("accounts:token-revoke", args=[theirs.token.pk]))
    assert response.status_code == 404 and _works(theirs.secret)
