"""Site-wide protections: CSRF on every form, security headers, user content served only
as sandboxed attachments, the API's rate limits."""

from __future__ import annotations

import re

import pytest
from django.core.cache import cache
from django.core.files.base import ContentFile
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from submissions.models import Submission
from tests.factories import UserFactory
from tests.release import REPO_ROOT

FORM = re.compile(r"<form\b[^>]*\bmethod=\"post\"[^>]*>(.*?)</form>", re.S | re.I)


def test_every_post_form_in_the_templates_carries_a_csrf_token():
    templates = sorted((REPO_ROOT / "templates").rglob("*.html"))
    forms = [
        (path.relative_to(REPO_ROOT), body)
        for path in templates
        for body in FORM.findall(path.read_text())
    ]
    assert len(forms) >= 5, "the templates' forms were not found"
    missing = [str(path) for path, body in forms if "{% csrf_token %}" not in body]
    assert not missing, f"POST forms without {{% csrf_token %}}: {missing}"


# Every route that takes a form post (and the API's session-authenticated writes).
POST_ROUTES = [
    ("login", {}, False),
    ("signup", {}, False),
    ("logout", {}, True),
    ("password_change", {}, True),
    ("password_reset", {}, False),
    ("submissions:new", {}, True),
    ("accounts:tokens", {}, True),
    ("accounts:token-revoke", {"pk": 1}, True),
    ("agents:new", {}, True),
    ("admin:login", {}, False),
    ("admin:submissions_submission_changelist", {}, True),
    ("api:tokens", {}, True),
    ("api:submissions", {}, True),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("name", "kwargs", "logged_in"), POST_ROUTES)
def test_a_post_without_the_csrf_token_is_refused(name, kwargs, logged_in):
    client = Client(enforce_csrf_checks=True)
    if logged_in:
        client.force_login(UserFactory(is_staff=True, is_superuser=True))
    response = client.post(reverse(name, kwargs=kwargs), {"username": "x", "password": "y"})
    assert response.status_code == 403, f"{name}: {response.status_code}"


def _every_route() -> list[tuple[str, dict]]:
    """Every named route of the site (the admin's too) with placeholder path arguments."""
    from django.urls import URLPattern, URLResolver, get_resolver
    from django.urls.converters import IntConverter

    found: dict[str, dict] = {}

    def walk(patterns, namespace: str) -> None:
        for entry in patterns:
            if isinstance(entry, URLResolver):
                inner = f"{namespace}{entry.namespace}:" if entry.namespace else namespace
                walk(entry.url_patterns, inner)
            elif isinstance(entry, URLPattern) and entry.name:
                converters = getattr(entry.pattern, "converters", {})
                kwargs = {
                    name: 1 if isinstance(converter, IntConverter) else "x"
                    for name, converter in converters.items()
                }
                found.setdefault(f"{namespace}{entry.name}", kwargs)

    walk(get_resolver().url_patterns, "")
    return sorted(found.items())


@pytest.mark.django_db
def test_no_route_takes_a_logged_in_post_without_the_csrf_token(catalogue):
    """The whole URL configuration: a cross-site POST riding a staff session is refused
    before any view acts on it (403), or the route takes no POST at all (405)."""
    from django.urls import NoReverseMatch

    client = Client(enforce_csrf_checks=True)
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    accepted = []
    routes = _every_route()
    for name, kwargs in routes:
        try:
            url = reverse(name, kwargs=kwargs)
        except NoReverseMatch:  # a regex route of the admin with a fixed choice
            continue
        code = client.post(url, {"name": "x"}).status_code
        if code not in (403, 405):
            accepted.append(f"{name} {url}: {code}")
    assert len(routes) > 50
    assert not accepted, accepted


@pytest.mark.django_db
def test_pages_carry_the_security_headers(client):
    response = client.get(reverse("leaderboard:board"))
    assert response.status_code == 200
    policy = response["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert "object-src 'none'" in policy and "unsafe-eval" not in policy
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"
    assert response["X-Frame-Options"] == "DENY"
    assert response["Cross-Origin-Opener-Policy"] == "same-origin"


@pytest.mark.django_db
def test_the_api_docs_page_has_no_inline_script(client):
    """Swagger UI is served split (its script from a URL of its own) so that the page's
    CSP (script-src 'self', no 'unsafe-inline') lets it run."""
    response = client.get(reverse("api:docs"))
    assert response.status_code == 200
    inline = re.findall(r"<script(?![^>]*\bsrc=)[^>]*>\s*\S", response.content.decode())
    assert not inline


@pytest.mark.django_db
def test_user_content_is_a_sandboxed_attachment(catalogue, user):
    from submissions import services

    submission = services.submission_create(
        owner=user,
        upload=ContentFile(b"<html><script>alert(1)</script></html>", name="x.html"),
        visibility=Submission.Visibility.PUBLIC,
    )
    client = Client()
    client.force_login(user)
    response = client.get(reverse("submissions:download", args=[submission.pk]))
    assert response.status_code == 200
    assert response["Content-Disposition"].startswith("attachment")
    assert response["Content-Type"] == "application/octet-stream"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert "sandbox" in response["Content-Security-Policy"]
    assert "default-src 'none'" in response["Content-Security-Policy"]


@pytest.mark.django_db
@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_board_downloads_are_sandboxed_attachments(catalogue, fmt):
    response = Client().get(reverse("leaderboard:board-download", args=[fmt]))
    assert response.status_code == 200
    assert response["Content-Disposition"].startswith("attachment")
    assert "sandbox" in response["Content-Security-Policy"]


@pytest.mark.django_db
def test_the_api_limits_anonymous_request_rates(catalogue, settings):
    cache.clear()
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"anon": "3/min", "user": "5/min"},
    }
    client = APIClient()
    codes = [client.get("/api/suites/").status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    response = client.get("/api/suites/")
    assert response.status_code == 429 and int(response["Retry-After"]) > 0
    assert response.json()["code"] == "throttled"
    # A user has their own, separate allowance.
    client.force_authenticate(UserFactory())
    assert [client.get("/api/suites/").status_code for _ in range(6)] == [200] * 5 + [429]
    cache.clear()
