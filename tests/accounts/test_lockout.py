"""Failed log-ins lock further attempts out, per username and per client address, on the
log-in page and for HTTP Basic on the API alike; the lockout ends after its window."""

from __future__ import annotations

import base64
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import LoginFailure
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery staple"


def _login(username: str, password: str, ip: str = "127.0.0.1"):
    return Client(REMOTE_ADDR=ip).post(
        reverse("login"), {"username": username, "password": password}
    )


def _fail(username: str, times: int, ip: str = "127.0.0.1") -> None:
    for _ in range(times):
        response = _login(username, "wrong password", ip)
        assert response.status_code == 200  # the form again, with Django's own message


def test_five_failures_lock_the_account_with_a_clear_message_even_for_the_right_password(user):
    _fail(user.username, 5)
    response = _login(user.username, PASSWORD)
    assert response.status_code == 429
    assert int(response["Retry-After"]) > 0
    text = response.content.decode()
    assert "Too many failed log-ins for this account" in text and "minutes" in text
    assert "_auth_user_id" not in response.wsgi_request.session
    # Attempts while locked out are not counted: the lockout ends on time.
    assert LoginFailure.objects.filter(username=user.username).count() == 5


def test_the_lockout_ends_after_its_window(user, settings):
    _fail(user.username, 5)
    assert _login(user.username, PASSWORD).status_code == 429
    window = settings.ATREX["LOGIN_LOCKOUT"]["WINDOW_S"]
    LoginFailure.objects.update(at=timezone.now() - timedelta(seconds=window + 1))
    response = _login(user.username, PASSWORD)
    assert response.status_code == 302  # logged in
    # A success clears the username's failures.
    assert not LoginFailure.objects.filter(username=user.username).exists()


def test_fewer_failures_do_not_lock(user):
    _fail(user.username, 4)
    assert _login(user.username, PASSWORD).status_code == 302


def test_usernames_are_counted_without_case(user):
    _fail(user.username.upper(), 5)
    assert _login(user.username, PASSWORD).status_code == 429


def test_many_failures_from_one_address_lock_that_address_out(settings):
    victim = UserFactory()
    for index in range(20):
        _login(f"guess{index}", "nope", ip="10.9.8.7")
    response = _login(victim.username, PASSWORD, ip="10.9.8.7")
    assert response.status_code == 429
    assert "your network address" in response.content.decode()
    # Another address is not affected.
    assert _login(victim.username, PASSWORD, ip="10.9.8.8").status_code == 302


def test_the_client_address_header_is_used_only_when_configured(settings):
    settings.ATREX = {**settings.ATREX, "CLIENT_IP_HEADER": "HTTP_X_REAL_IP"}
    client = Client(REMOTE_ADDR="127.0.0.1", HTTP_X_REAL_IP="192.0.2.5")
    client.post(reverse("login"), {"username": "someone", "password": "x"})
    assert LoginFailure.objects.get().ip == "192.0.2.5"


def test_http_basic_on_the_api_counts_and_honours_the_lockout(user):
    def basic(password: str):
        client = APIClient()
        credentials = base64.b64encode(f"{user.username}:{password}".encode()).decode()
        client.credentials(HTTP_AUTHORIZATION=f"Basic {credentials}")
        return client.post("/api/tokens/")

    for _ in range(5):
        assert basic("wrong").status_code == 401
    response = basic(PASSWORD)
    assert response.status_code == 429
    assert "Too many failed log-ins" in response.json()["detail"]
    assert response.json()["code"] == "throttled"


def test_the_admin_login_is_locked_too(user):
    _fail(user.username, 5)
    user.is_staff = True
    user.save()
    response = Client().post(
        reverse("admin:login"), {"username": user.username, "password": PASSWORD}
    )
    assert response.status_code == 200  # the form again: not logged in
    assert "_auth_user_id" not in response.wsgi_request.session
