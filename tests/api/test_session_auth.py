"""The API with the site's session (atrex_site.api.authentication.ReaderSessionAuthentication):
reads find the signed-in user as the shared pages do (no query on most requests), a log-out
counts at the next request, and writes go through Django's own check and CSRF as before."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from atrex_site import page_cache

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_kept_readers():
    page_cache.forget_readers()
    yield
    page_cache.forget_readers()


def test_a_read_by_session_is_the_user_and_a_log_out_counts_at_once(client, user):
    client.force_login(user)
    first, second = client.get("/api/quota/"), client.get("/api/quota/")  # the second: kept
    assert first.status_code == second.status_code == 200
    assert first.json() == second.json()
    client.logout()
    assert client.get("/api/quota/").status_code == 401


def test_a_read_by_session_after_the_first_does_not_look_the_user_up(client, user):
    client.force_login(user)
    client.get("/api/quota/")
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/api/quota/").status_code == 200
    assert not [q for q in queries.captured_queries if 'FROM "auth_user"' in q["sql"]]


def test_writes_by_session_need_the_csrf_token(user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    assert client.get("/api/quota/").status_code == 200
    response = client.post("/api/submissions/check/")
    assert response.status_code == 403 and "CSRF" in response.json()["detail"]


def test_a_disabled_account_cannot_write_at_the_next_request(client, user):
    client.force_login(user)
    assert client.post("/api/submissions/check/").status_code == 400  # no bundle: signed in
    assert client.get("/api/quota/").status_code == 200  # the reader is kept
    get_user_model().objects.filter(pk=user.pk).update(is_active=False)
    assert client.post("/api/submissions/check/").status_code == 401
