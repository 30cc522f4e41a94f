"""Shared copies of the public pages for every reader (atrex_site/page_cache.py): signed-in
readers and API tokens get the copy built for an anonymous reader, with their own site
header; nothing of one reader reaches another; a bump retires the copies at the next
request; one request rebuilds while the others are served the previous copy."""

from __future__ import annotations

import re
import threading
import time

import pytest
from django.conf import settings
from django.core.cache import cache
from django.test import Client
from django.urls import reverse

from accounts.services import api_token_create
from atrex_site import page_cache
from submissions.models import Submission
from tests.factories import UserFactory
from tests.leaderboard.results_factory import publish_row

pytestmark = pytest.mark.django_db

CSRF_TOKEN = re.compile(rb'name="csrfmiddlewaretoken" value="[^"]+"')


@pytest.fixture(autouse=True, params=["memory", "redis"])
def shared_copies(request, settings):
    """Every test in the per-process memory cache (development, most tests), where every
    API request runs its view, and in Redis with sessions read through it (production),
    where the shared answers are served before DRF runs (atrex_site.api.shared)."""
    settings.ATREX = {**settings.ATREX, "PUBLIC_PAGE_CACHE_S": 60}
    if request.param == "redis":  # its own key prefix, deleted afterwards
        request.getfixturevalue("redis_cache")
        settings.SESSION_ENGINE = "django.contrib.sessions.backends.cached_db"
    else:
        cache.clear()
    page_cache.forget_readers()
    yield
    if request.param == "memory":
        cache.clear()
    page_cache.forget_readers()


@pytest.fixture
def alice(db):
    return UserFactory(username="alice-owner")


@pytest.fixture
def bob(db):
    return UserFactory(username="bob-reader")


def _board_url(catalogue) -> str:
    return reverse("leaderboard:board") + f"?suite={catalogue.slug}&hardware=cpu-dev"


def _api_url(catalogue) -> str:
    return reverse("api:leaderboard") + f"?suite={catalogue.slug}&hardware=cpu-dev"


def _without_csrf_tokens(content: bytes) -> bytes:
    return CSRF_TOKEN.sub(b"csrf", content)


def test_a_signed_in_reader_gets_the_shared_page_with_their_own_header(
    client, catalogue, alice, bob, django_assert_max_num_queries
):
    row = publish_row(owner=alice, suite=catalogue, title="alice's kernels", fraction=0.3)
    for url in (_board_url(catalogue), reverse("submissions:detail", args=[row.pk])):
        assert client.get(url)["X-Atrex-Cache"] == "miss"  # built for anonymous readers
        client.force_login(bob)
        # The session, the reader, and (the submission page) whether they own it.
        with django_assert_max_num_queries(3):
            shared = client.get(url)
        assert shared.status_code == 200 and shared["X-Atrex-Cache"] == "hit"
        assert b"Log out (bob-reader)" in shared.content and b"Log in" not in shared.content
        client.logout()


def test_the_shared_page_is_the_page_built_for_the_reader(client, catalogue, alice, bob, settings):
    """A page that shows a reader more than the site header (their own row, a control)
    must say so (``shared_page(view, personal=...)``): this fails where it does not."""
    row = publish_row(owner=alice, suite=catalogue, title="alice's kernels", fraction=0.3)
    other = publish_row(owner=UserFactory(), suite=catalogue, title="other's", fraction=0.2)
    urls = [
        _board_url(catalogue),
        reverse("submissions:detail", args=[row.pk]),
        reverse("leaderboard:compare") + f"?submissions={row.pk},{other.pk}",
        reverse("leaderboard:compare") + f"?submissions={other.pk}",  # the form
        reverse("leaderboard:history") + f"?suite={catalogue.slug}&hardware=cpu-dev",
        reverse("leaderboard:operator", args=["rms_norm"])
        + f"?suite={catalogue.slug}&hardware=cpu-dev",
    ]
    for reader in (alice, bob):
        client.force_login(reader)
        for url in urls:
            settings.ATREX = {**settings.ATREX, "PUBLIC_PAGE_CACHE_S": 60}
            client.get(url)
            shared = client.get(url)
            settings.ATREX = {**settings.ATREX, "PUBLIC_PAGE_CACHE_S": 0}
            own = client.get(url)
            assert shared.status_code == own.status_code == 200
            assert "X-Atrex-Cache" not in own
            assert _without_csrf_tokens(shared.content) == _without_csrf_tokens(own.content)
        client.logout()


def test_nothing_of_one_reader_reaches_another(client, catalogue, alice, bob):
    """alice signs in first and so triggers every build; her name, her private submission
    and her running one never reach bob or an anonymous reader."""
    public = publish_row(owner=alice, suite=catalogue, title="alice public", fraction=0.3)
    private = publish_row(owner=alice, suite=catalogue, title="alice secret", fraction=0.6)
    Submission.objects.filter(pk=private.pk).update(visibility="private")
    running = publish_row(owner=alice, suite=catalogue, title="alice unpublished", fraction=0.2)
    Submission.objects.filter(pk=running.pk).update(status="running")
    page_cache.board_changed()
    urls = [
        _board_url(catalogue),
        _api_url(catalogue),
        reverse("submissions:detail", args=[public.pk]),
        reverse("submissions:detail", args=[private.pk]),
        reverse("submissions:detail", args=[running.pk]),
        reverse("submissions:results-download", args=[private.pk, "json"]),
        reverse("api:compare") + f"?submissions={public.pk},{private.pk}",
    ]
    client.force_login(alice)
    for url in urls:
        assert client.get(url).status_code == 200
    assert b"alice secret" in client.get(urls[3]).content  # she sees her own
    client.logout()
    client.force_login(bob)
    seen_by_bob = [client.get(url) for url in urls]
    client.logout()
    seen_by_anyone = [client.get(url) for url in urls]
    for response in seen_by_bob + seen_by_anyone:
        assert b"alice secret" not in response.content
        assert b"Log out (alice-owner)" not in response.content
        assert b"cancel-form" not in response.content  # the owner's cancel button
    assert [r.status_code for r in seen_by_bob] == [200, 200, 200, 404, 200, 404, 404]
    assert b"Log out (bob-reader)" in seen_by_bob[0].content
    assert b"alice unpublished" not in seen_by_bob[0].content  # not on the board
    token = api_token_create(user=bob, name="bob's script").secret
    listed = client.get(urls[1], HTTP_AUTHORIZATION=f"Token {token}").json()
    assert [row["title"] for row in listed["results"]] == ["alice public"]


def test_staff_and_the_owner_get_pages_built_for_them(client, catalogue, alice):
    row = publish_row(owner=alice, suite=catalogue, title="alice's kernels", fraction=0.3)
    url = reverse("submissions:detail", args=[row.pk])
    assert client.get(url)["X-Atrex-Cache"] == "miss"
    for reader in (alice, UserFactory(is_staff=True)):
        client.force_login(reader)
        response = client.get(url)
        assert response.status_code == 200 and "X-Atrex-Cache" not in response
        client.logout()


def test_a_bump_retires_the_copies_at_the_next_request_for_every_reader(
    client, catalogue, alice, bob
):
    publish_row(owner=alice, suite=catalogue, title="first row", fraction=0.3)
    token = api_token_create(user=bob, name="bob's script").secret
    client.force_login(bob)
    assert b"first row" in client.get(_board_url(catalogue)).content
    assert client.get(_api_url(catalogue), HTTP_AUTHORIZATION=f"Token {token}").json()["count"] == 1
    # Another submitter's (the board shows each submitter's best).
    publish_row(owner=UserFactory(), suite=catalogue, title="second row", fraction=0.5)
    page = client.get(_board_url(catalogue))
    assert page["X-Atrex-Cache"] == "miss" and b"second row" in page.content
    listed = client.get(_api_url(catalogue), HTTP_AUTHORIZATION=f"Token {token}").json()
    assert listed["count"] == 2


def test_while_one_request_rebuilds_the_others_get_the_previous_copy(
    client, catalogue, alice, rf, django_assert_num_queries
):
    publish_row(owner=alice, suite=catalogue, title="first row", fraction=0.3)
    url = _board_url(catalogue)
    assert client.get(url)["X-Atrex-Cache"] == "miss"
    # Another submitter's (the board shows each submitter's best).
    publish_row(owner=UserFactory(), suite=catalogue, title="second row", fraction=0.5)  # a bump
    # Another process has taken this generation's lock and is building the page.
    key = page_cache.shared_key(page_cache.page_key(rf.get(url)))
    lock = f"{key}:lock:{page_cache.board_generation()}"
    assert cache.add(lock, "another builder", 60)
    with django_assert_num_queries(0):
        stale = client.get(url)
    assert stale["X-Atrex-Cache"] == "stale" and b"first row" in stale.content
    assert b"second row" not in stale.content
    cache.delete(lock)  # that build died: the next request builds
    fresh = client.get(url)
    assert fresh["X-Atrex-Cache"] == "miss" and b"second row" in fresh.content


def test_two_concurrent_misses_build_once():
    builds = []

    def build() -> str:
        builds.append(threading.get_ident())
        time.sleep(0.3)
        return "the board"

    answers: list[tuple[str, str]] = []
    readers = [
        threading.Thread(target=lambda: answers.append(page_cache.shared_value_state("k", build)))
        for _ in range(2)
    ]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join()
    assert len(builds) == 1
    assert sorted(answers) == [("the board", "hit"), ("the board", "miss")]


def test_a_failed_build_frees_the_lock_for_the_next_request():
    def failing() -> str:
        raise RuntimeError("database gone")

    with pytest.raises(RuntimeError):
        page_cache.shared_value("k", failing)
    assert page_cache.shared_value_state("k", lambda: "built") == ("built", "miss")


def test_a_token_costs_one_indexed_query_then_none_and_no_password_hash(
    client, catalogue, bob, django_assert_num_queries
):
    publish_row(owner=bob, suite=catalogue, title="first row", fraction=0.3)
    token = api_token_create(user=bob, name="bob's script").secret
    url = _api_url(catalogue)
    assert client.get(url).status_code == 200  # the shared copy built
    # The token by its SHA-256 digest (last use recorded at most once a minute), then kept
    # in the cache (accounts.services); the list is the shared copy.
    with django_assert_num_queries(2) as queries:  # the token, its last use
        assert client.get(url, HTTP_AUTHORIZATION=f"Token {token}").status_code == 200
    assert "accounts_apitoken" in queries.captured_queries[0]["sql"]
    with django_assert_num_queries(0):
        response = client.get(url, HTTP_AUTHORIZATION=f"Token {token}")
    assert response.status_code == 200 and response.json()["count"] == 1


def test_the_comparison_is_shared_only_between_readers_who_see_the_same(
    client, catalogue, alice, bob, django_assert_max_num_queries
):
    first = publish_row(owner=alice, suite=catalogue, title="slow", fraction=0.2)
    second = publish_row(owner=alice, suite=catalogue, title="fast", fraction=0.4)
    url = reverse("api:compare") + f"?submissions={first.pk},{second.pk}"
    body = client.get(url).json()
    client.force_login(bob)
    assert client.get(url).json() == body
    with django_assert_max_num_queries(1):  # the session (the reader is kept)
        shared = client.get(url)
    assert shared["X-Atrex-Cache"] == "hit" and shared.json() == body
    # Made private: as every change that can hide a submission does (a save, a status
    # move, a curation), the board's generation moves on and the shared answer is retired.
    Submission.objects.filter(pk=second.pk).update(visibility="private")
    page_cache.board_changed()
    assert client.get(url).status_code == 404
    client.force_login(alice)
    assert [s["title"] for s in client.get(url).json()["submissions"]] == ["slow", "fast"]
    client.logout()
    assert client.get(url).status_code == 404  # her answer was hers alone


def test_a_change_that_moved_no_generation_counts_within_the_copy_seconds(
    client, catalogue, alice, bob, settings
):
    settings.ATREX = {**settings.ATREX, "PUBLIC_PAGE_CACHE_S": 1}
    first = publish_row(owner=alice, suite=catalogue, title="slow", fraction=0.2)
    second = publish_row(owner=alice, suite=catalogue, title="fast", fraction=0.4)
    url = reverse("api:compare") + f"?submissions={first.pk},{second.pk}"
    assert client.get(url).status_code == 200
    Submission.objects.filter(pk=second.pk).update(visibility="private")  # no bump
    time.sleep(1.1)
    assert client.get(url).status_code == 404


@pytest.mark.parametrize("page", ["submission page", "comparison API"])
def test_a_copy_made_private_is_not_served_while_another_request_rebuilds(
    client, catalogue, alice, bob, rf, monkeypatch, page
):
    """The first build after the change finds the answer no longer shareable; the old copy
    goes then, not when it expires, so readers who come while yet another request builds
    are not served it (they wait for that build, or build themselves)."""
    public = publish_row(owner=alice, suite=catalogue, title="alice public", fraction=0.3)
    other = publish_row(owner=alice, suite=catalogue, title="alice other", fraction=0.4)
    if page == "submission page":
        url = reverse("submissions:detail", args=[other.pk])
        key = page_cache.page_key(rf.get(url))
    else:
        url = reverse("api:compare") + f"?submissions={public.pk},{other.pk}"
        key = page_cache.page_key(rf.get(url), absolute=True)
    client.force_login(bob)
    assert client.get(url).status_code == 200  # shared
    Submission.objects.filter(pk=other.pk).update(visibility="private")
    page_cache.board_changed()
    assert client.get(url).status_code == 404  # bob's request builds: not shareable
    # Another request has taken this generation's lock and is building.
    lock = f"{page_cache.shared_key(key)}:lock:{page_cache.board_generation()}"
    assert cache.add(lock, "another builder", 60)
    monkeypatch.setattr(page_cache, "WAIT_S", 0.1)
    assert client.get(url).status_code == 404
    client.logout()
    assert client.get(url).status_code == 404
    client.force_login(alice)
    assert client.get(url).status_code == 200  # hers
    cache.delete(lock)


def test_a_log_out_counts_at_once_even_with_the_old_session_cookie(client, catalogue, bob):
    publish_row(owner=bob, suite=catalogue, title="first row", fraction=0.3)
    client.force_login(bob)
    assert b"Log out (bob-reader)" in client.get(_board_url(catalogue)).content
    old_cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
    client.logout()
    client.cookies[settings.SESSION_COOKIE_NAME] = old_cookie  # replayed after the log-out
    page = client.get(_board_url(catalogue))
    assert page.status_code == 200
    assert b"Log out (bob-reader)" not in page.content and b"Log in" in page.content


def test_the_compare_page_is_shared_but_the_form_and_ones_own_are_built_for_the_reader(
    client, catalogue, alice, bob
):
    mine = publish_row(owner=bob, suite=catalogue, title="bob's private", fraction=0.5)
    Submission.objects.filter(pk=mine.pk).update(visibility="private")
    first = publish_row(owner=alice, suite=catalogue, title="slow", fraction=0.2)
    second = publish_row(owner=alice, suite=catalogue, title="fast", fraction=0.4)
    page_cache.board_changed()
    compared = reverse("leaderboard:compare") + f"?submissions={first.pk},{second.pk}"
    form = reverse("leaderboard:compare") + f"?submissions={first.pk}"
    assert client.get(compared)["X-Atrex-Cache"] == "miss"
    client.force_login(bob)
    shared = client.get(compared)
    assert shared["X-Atrex-Cache"] == "hit" and b"Log out (bob-reader)" in shared.content
    own_form = client.get(form)  # lists his own (private) submission to tick
    assert "X-Atrex-Cache" not in own_form and b"bob&#x27;s private" in own_form.content
    own_comparison = client.get(
        reverse("leaderboard:compare") + f"?submissions={mine.pk},{first.pk}"
    )
    assert own_comparison.status_code == 200 and "X-Atrex-Cache" not in own_comparison
    client.force_login(alice)
    assert "X-Atrex-Cache" not in client.get(compared)  # her own submissions
    client.logout()
    for url in (form, reverse("leaderboard:compare") + f"?submissions={mine.pk},{first.pk}"):
        assert b"bob&#x27;s private" not in client.get(url).content


def _form_token(content: bytes) -> str:
    found = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', content)
    assert found, "no CSRF token on the page"
    return found.group(1).decode()


@pytest.mark.parametrize("has_csrf_cookie", [False, True])
def test_the_log_out_form_of_a_shared_page_passes_the_csrf_check(
    catalogue, alice, bob, has_csrf_cookie
):
    """The header's CSRF token is masked per response (``page_cache.csrf_form_token``) in
    Django's format; a reader without a CSRF cookie is sent one, a reader with one is not
    sent it again, and either way the form's token passes Django's check."""
    publish_row(owner=alice, suite=catalogue, title="alice's kernels", fraction=0.3)
    url = _board_url(catalogue)
    client = Client(enforce_csrf_checks=True)
    client.force_login(bob)
    if has_csrf_cookie:
        client.get(reverse("login"))  # a page built by a template sets it
        assert settings.CSRF_COOKIE_NAME in client.cookies
        client.get(url)  # the copy built
    else:
        client.get(url)  # the copy built
        client.cookies.pop(settings.CSRF_COOKIE_NAME, None)
    pages = [client.get(url) for _ in range(2)]
    assert [page["X-Atrex-Cache"] for page in pages] == ["hit", "hit"]
    tokens = [_form_token(page.content) for page in pages]
    assert tokens[0] != tokens[1]  # masked afresh
    sent = [settings.CSRF_COOKIE_NAME in page.cookies for page in pages]
    assert sent == ([False, False] if has_csrf_cookie else [True, False])
    assert "Cookie" in pages[1]["Vary"]  # the header is this reader's
    refused = client.post(reverse("logout"), {"csrfmiddlewaretoken": "x" * 64})
    assert refused.status_code == 403
    logged_out = client.post(reverse("logout"), {"csrfmiddlewaretoken": tokens[1]})
    assert logged_out.status_code == 302
    assert b"Log in" in client.get(url).content


def test_a_process_serves_its_kept_copy_only_while_the_stamp_is_its_own(client, catalogue, rf):
    """A copy is read once per process and build (``page_cache._KeptEntries``): a hit reads
    the copy's stamp, not the copy; a copy that another process built since (a new stamp)
    is read and served at the next request."""
    url = _board_url(catalogue)
    assert client.get(url)["X-Atrex-Cache"] == "miss"  # built here, and kept
    key = page_cache.shared_key(page_cache.page_key(rf.get(url)))
    generation, built_at, (status, headers, content) = cache.get(key)
    cache.delete(key)  # the stamp stays: a hit must not need the copy
    assert client.get(url).content == content
    # Another process rebuilds the page (the same generation, a later build).
    rebuilt = (generation, built_at + 1, (status, headers, b"<p>rebuilt elsewhere</p>"))
    cache.set_many({key: rebuilt, page_cache.stamp_key(key): rebuilt[:2]}, 60)
    page = client.get(url)
    assert page["X-Atrex-Cache"] == "hit" and page.content == b"<p>rebuilt elsewhere</p>"
