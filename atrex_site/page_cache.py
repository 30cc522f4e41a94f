"""Shared copies of the public pages, for every reader: anonymous, signed in or with a token.

The board, its API list, a submission's page, the comparisons, downloads, operator and
history pages cost tenths of a second to build and are the same for nearly everyone who
reads them. They are built once and shared:

* **Whole pages** (``shared_page``): a page is always built for an *anonymous* copy of the
  request (no cookies, no ``Authorization``, ``AnonymousUser``), so that a shared copy can
  only hold what anyone may see. A reader without a session gets that copy as it is. A
  signed-in reader gets it with the site header (``<header class="top">``, the navigation
  with their name and the log-out form) taken from ``base.html`` rendered for them: the
  only part of these pages that depends on who reads them. The page is built for the
  reader alone (never shared) when it could differ in more: staff (hidden shapes, curation
  controls), a view's ``personal`` test (the owner of the submission on the page), or
  messages waiting to be shown.
* **Values** (``shared_value``): what an API answer or a comparison is computed from, for
  views that must run per request anyway (token authentication, throttling); the API's
  shared answers are served before DRF runs where their reader's credential and rate
  limits can be checked in the same round trip (``atrex_site.api.shared``).

Every copy is filed with the board's *generation*, a counter in the same cache that
anything changing what the public pages show bumps (``board_changed``): a score stored or
refreshed, a submission saved (visibility, curation flags, title), a status moving to or
from ``published``, a suite version or hardware profile saved. A copy of an older
generation, or older than ``ATREX["PUBLIC_PAGE_CACHE_S"]`` seconds (a running submission's
page changes without a bump), is rebuilt by the first request that sees it, and by that
request only: it takes a lock in the cache (``cache.add``, atomic in Redis and in the
per-process memory cache), and while it builds, other requests get the previous copy
(*stale while revalidate*; a lock is per generation, so a bump during a build starts one
more build, not a herd). Where there is no copy yet, the others wait for the builder
(polling) instead of building too. So a bump costs one build per page, not one per reader.

A copy served costs one round trip to the cache: the generation and the copy's stamp (its
generation and build time), with a signed-in reader's session (``atrex_site.one_trip``); the
copy itself is read once per process and build, and kept while the stamp is its own. With a
cache shared by every process (Redis in production: ``DJANGO_CACHE_URL``), a change is seen
by the next request. With the per-process default cache, a change made in another process
(a worker publishing) is seen when the copy is older than the seconds above (``0`` turns
every shared copy off).

It lives here, beside the settings, because the board (``leaderboard``) and the
submission pages (``submissions``) both use it, and ``submissions`` must not import the
board; ``leaderboard``'s app config connects the signals that bump the generation.
"""

from __future__ import annotations

import copy
import hashlib
import os
import time
import uuid
from collections.abc import Callable
from functools import wraps
from importlib import import_module
from typing import Any, TypeVar

from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.auth.models import AnonymousUser
from django.contrib.messages import get_messages
from django.contrib.sessions.backends.cache import SessionStore as CacheSessionStore
from django.contrib.sessions.backends.cached_db import SessionStore as CachedDbSessionStore
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.middleware.csrf import CSRF_ALLOWED_CHARS, CSRF_SECRET_LENGTH
from django.template.loader import render_to_string

from atrex_site import one_trip

GENERATION_KEY = "atrex:board-generation"
_KEPT_HEADERS = ("Content-Type", "Content-Disposition", "Content-Language")
# The part of every HTML page that depends on the reader (base.html's site header).
HEADER_OPEN, HEADER_CLOSE = '<header class="top">', "</header>"
# A builder holds its lock at most this long (a build that dies frees it by expiring).
LOCK_S = 60
# A request that finds no copy at all waits this long for another request's build.
WAIT_S = 30.0
POLL_S = 0.02
# Copies stay this many times their freshness, to be served while their successor builds.
KEEP_FACTOR = 60

# Readers' site headers kept per process (see _personal_header).
HEADER_S = 60.0
HEADERS_KEPT = 4096
_HEADERS: dict[tuple, tuple[float, str]] = {}
# Signed-in readers kept per process (see session_reader).
READER_S = 10.0
_READERS: dict[tuple, tuple[float, Any]] = {}
_CSRF_PLACEHOLDER = "atrex-csrf-token-placeholder"

T = TypeVar("T")


def _seconds() -> int:
    return int(settings.ATREX.get("PUBLIC_PAGE_CACHE_S", 0) or 0)


def board_generation() -> int:
    """The current generation (set to the clock in ms when the cache has none, so that a
    cache that lost the counter never reuses an old generation's copies)."""
    generation = cache.get(GENERATION_KEY)
    if generation is None:
        generation = int(time.time() * 1000)
        cache.add(GENERATION_KEY, generation, None)
        generation = cache.get(GENERATION_KEY, generation)
    return generation


def board_changed(**_signal_kwargs: Any) -> None:
    """Retire every shared copy (a signal receiver, also called by services directly)."""
    try:
        cache.incr(GENERATION_KEY)
    except ValueError:  # no counter yet (or evicted): start one past any earlier value
        cache.set(GENERATION_KEY, int(time.time() * 1000), None)


# ------------------------------------------------------------------ shared values


class _NotShared:
    """What a build returns when its result must reach this request only (``value``)."""

    def __init__(self, value: Any) -> None:
        self.value = value


def not_shared(value: T) -> T:
    """Wrap a build's result that must not be stored (an error page, a 404)."""
    return _NotShared(value)  # type: ignore[return-value]


Entry = tuple[int, float, Any]  # (generation, built at, value) of a stored copy


def stamp_key(key: str) -> str:
    """The key of the stamp of the entry under ``key``: its (generation, built at)."""
    return f"{key}:stamp"


class _KeptEntries:
    """The entries this process read, by key, each served again while the cache's stamp
    for its key is still its own: a request then reads the stamp (a few bytes) where it
    read the whole copy (a board page is 180 kB: a fifth of a millisecond of this client's
    CPU, and Redis's to send it). At most ``MAX_BYTES`` of pages and answers are kept."""

    MAX_BYTES = 32 << 20
    GUESSED_BYTES = 64 << 10  # a value that is not a page's copy

    def __init__(self) -> None:
        self.entries: dict[str, Entry] = {}
        self.size = 0

    def get(self, key: str, stamp: Any) -> Entry | None:
        entry = self.entries.get(key)
        if entry is None or stamp is None or tuple(stamp) != entry[:2]:
            return None
        return entry

    def _size(self, entry: Entry) -> int:
        value = entry[2]
        page = isinstance(value, tuple) and len(value) == 3 and isinstance(value[2], bytes)
        return len(value[2]) if page else self.GUESSED_BYTES

    def keep(self, key: str, entry: Entry) -> None:
        replaced = self.entries.pop(key, None)
        if replaced is not None:
            self.size -= self._size(replaced)
        size = self._size(entry)
        if self.size + size > self.MAX_BYTES:
            self.clear()
        self.entries[key] = entry
        self.size += size

    def clear(self) -> None:
        self.entries.clear()
        self.size = 0


_ENTRIES = _KeptEntries()


def entry_for(key: str, stamp: Any) -> Entry | None:
    """The entry under ``key`` whose stamp was just read: kept in this process, or read
    (another round trip: once per process and build)."""
    if stamp is None:
        return None
    entry = _ENTRIES.get(key, stamp)
    if entry is None:
        entry = cache.get(key)
        if entry is not None:
            _ENTRIES.keep(key, entry)  # the stamp may be older: it is kept for its own
    return entry


def _read(key: str) -> tuple[int, Entry | None]:
    """The current generation and the stored entry (one round trip to the cache, two when
    this process has not kept the entry yet)."""
    generation, stamp = one_trip.read([GENERATION_KEY, stamp_key(key)])
    if generation is None:
        generation = board_generation()
    return generation, entry_for(key, stamp)


def _fresh(entry: Entry | None, generation: int, seconds: int) -> bool:
    return entry is not None and entry[0] == generation and time.time() - entry[1] < seconds


def _drop_older(key: str, generation: int) -> None:
    """What was shared is no longer (made private, unpublished, gone): its copy of an older
    generation must not go on being served (stale while revalidate) to other readers while
    other requests build."""
    current = cache.get(stamp_key(key))
    if current is not None and current[0] < generation:
        cache.delete_many([key, stamp_key(key)])


def _build(key: str, generation: int, build: Callable[[], Any], seconds: int) -> tuple[Any, bool]:
    """Run ``build`` (the caller holds the lock) and store its result unless not shared."""
    built_at = time.time()
    try:
        value = build()
    except (Http404, PermissionDenied):
        _drop_older(key, generation)
        raise
    if isinstance(value, _NotShared):
        _drop_older(key, generation)
        return value.value, False
    current = cache.get(stamp_key(key))
    # A slower build of an older generation never replaces a newer one's copy.
    if current is None or current[0] <= generation:
        entry = (generation, built_at, value)
        # The entry and its stamp together (one command in Redis: MSET).
        cache.set_many({key: entry, stamp_key(key): entry[:2]}, seconds * KEEP_FACTOR)
        _ENTRIES.keep(key, entry)
    return value, True


def shared_key(key: str) -> str:
    """The cache key of the copy shared under ``key``."""
    return f"atrex:shared:{key}"


def shared_value_state(
    key: str,
    build: Callable[[], T],
    *,
    seconds: int | None = None,
    found: tuple[int, Entry | None] | None = None,
) -> tuple[T, str]:
    """``shared_value`` and how it was answered: ``hit`` (a fresh copy), ``miss`` (built
    by this request), ``stale`` (the previous copy, while another request rebuilds) or
    ``off`` (no sharing: ``PUBLIC_PAGE_CACHE_S`` is 0, or the result was not shared).
    ``found``: the generation and the entry under ``shared_key(key)``, where the caller
    has just read them."""
    seconds = _seconds() if seconds is None else seconds
    if not seconds:
        value = build()
        return (value.value if isinstance(value, _NotShared) else value), "off"
    key = shared_key(key)
    generation, entry = _read(key) if found is None else found
    if _fresh(entry, generation, seconds):
        return entry[2], "hit"  # type: ignore[index]
    owner = uuid.uuid4().hex
    deadline = time.monotonic() + WAIT_S
    while True:
        lock = f"{key}:lock:{generation}"
        if cache.add(lock, owner, LOCK_S):
            try:
                value, shared = _build(key, generation, build, seconds)
            finally:
                if cache.get(lock) == owner:
                    cache.delete(lock)
            return value, "miss" if shared else "off"
        if entry is not None:
            return entry[2], "stale"  # another request rebuilds: the previous copy meanwhile
        if time.monotonic() >= deadline:
            value = build()  # the builder is too slow: build without waiting any longer
            return (value.value if isinstance(value, _NotShared) else value), "off"
        # No copy at all yet (a cold cache): wait for the builder rather than build too.
        time.sleep(POLL_S)
        generation, entry = _read(key)
        if _fresh(entry, generation, seconds):
            return entry[2], "hit"  # type: ignore[index]
        # A copy of an older generation (a bump during that build) is served at the next
        # turn unless this request gets the new generation's lock.


def shared_value(key: str, build: Callable[[], T], *, seconds: int | None = None) -> T:
    """The value of ``build()`` shared by every process under ``key`` for the current
    generation and at most ``seconds`` (default ``PUBLIC_PAGE_CACHE_S``); built by one
    request at a time (see the module). ``key`` must name everything the value depends on;
    the value must not depend on who asks. A build may return ``not_shared(value)``."""
    return shared_value_state(key, build, seconds=seconds)[0]


# ------------------------------------------------------------------ whole pages


def sharing_on() -> bool:
    """Whether shared copies are on (``PUBLIC_PAGE_CACHE_S`` above 0)."""
    return _seconds() > 0


def page_key(request: HttpRequest, *, absolute: bool = False) -> str:
    """The key of a page's copy: its path and query, with the scheme and host where the
    answer holds absolute links (the API's ``next``, ``previous``)."""
    where = request.build_absolute_uri() if absolute else request.get_full_path()
    return f"page:{request.method}:{hashlib.sha256(where.encode()).hexdigest()}"


def fresh_copy(key: str, generation: int | None, stamp: Any) -> Any | None:
    """The copy shared under ``key`` where it may be served as a ``hit``, from the current
    ``generation`` and its stamp (``stamp_key(shared_key(key))``) just read, and only where
    this process keeps that entry; else None (absent, of an older generation, too old, or
    not kept here: the caller reads it the usual way)."""
    entry = _ENTRIES.get(shared_key(key), stamp)
    if generation is None or not _fresh(entry, generation, _seconds()):
        return None
    return entry[2]  # type: ignore[index]


def _as_copy(response: HttpResponse) -> Any:
    """A response as a shareable copy, or ``not_shared`` when it must not be shared."""
    if hasattr(response, "render") and callable(response.render):
        response = response.render()  # DRF and template responses render lazily
    if response.status_code != 200 or response.streaming or response.cookies:
        return not_shared(response)
    headers = {name: response[name] for name in _KEPT_HEADERS if name in response}
    return (response.status_code, headers, response.content)


def copy_response(kept: Any, state: str) -> HttpResponse:
    """The response of a page's copy (``_as_copy``), marked with how it was answered."""
    if isinstance(kept, HttpResponse):
        return kept
    status, headers, content = kept
    response = HttpResponse(content, status=status)
    for name, value in headers.items():
        response[name] = value
    response["X-Atrex-Cache"] = state
    return response


def _anonymous_copy(request: HttpRequest) -> HttpRequest:
    """The same request as a reader without credentials makes it."""
    anonymous = copy.copy(request)
    anonymous.META = {
        name: value
        for name, value in request.META.items()
        if name not in ("HTTP_COOKIE", "HTTP_AUTHORIZATION", "CSRF_COOKIE")
    }
    anonymous.COOKIES = {}
    anonymous.user = AnonymousUser()
    anonymous.session = import_module(settings.SESSION_ENGINE).SessionStore()  # empty, unsaved
    for private in ("_messages", "auser", "_cached_user"):
        anonymous.__dict__.pop(private, None)
    return anonymous


def _shared_page(
    view: Callable[..., HttpResponse],
    request: HttpRequest,
    args,
    kwargs,
    *,
    key: str,
    found: tuple[int, Entry | None] | None = None,
):
    """The shared copy of the page under ``key`` (built for an anonymous copy of
    ``request``); ``found``: its generation and entry where the caller has just read them."""

    def build() -> Any:
        anonymous = _anonymous_copy(request)
        response = view(anonymous, *args, **kwargs)
        if anonymous.META.get("CSRF_COOKIE_NEEDS_UPDATE"):
            return not_shared(response)  # a form's CSRF token is per reader
        return _as_copy(response)

    kept, state = shared_value_state(key, build, found=found)
    return kept, state


def session_cache_key(request: HttpRequest) -> str | None:
    """The cache key of this request's session where the session is kept in the default
    cache (Django's ``cached_db`` and ``cache`` engines) and has a key, else None."""
    session = getattr(request, "session", None)
    if (
        not isinstance(session, (CachedDbSessionStore, CacheSessionStore))
        or settings.SESSION_CACHE_ALIAS != "default"
        or not session.session_key
    ):
        return None
    return session.cache_key


def session_prime(request: HttpRequest, data: dict[str, Any] | None) -> None:
    """Give ``request.session`` the data just read under its ``session_cache_key`` (what its
    ``load()`` would have read there), so that it does not read it again; None (not in the
    cache): the session loads as usual (the database, for ``cached_db``)."""
    if data is not None:
        request.session._session_cache = data  # type: ignore[attr-defined]


def _read_with_session(request: HttpRequest, key: str) -> tuple[int, Entry | None]:
    """``_read`` of the copy under ``key`` and, in the same round trip, the reader's session
    (``session_prime``)."""
    session_key = session_cache_key(request)
    if session_key is None:
        return _read(key)
    data, generation, stamp = one_trip.read([session_key, GENERATION_KEY, stamp_key(key)])
    session_prime(request, data)
    if generation is None:
        generation = board_generation()
    return generation, entry_for(key, stamp)


# A CSRF token for the header's log-out form: Django's format (a random mask, then the secret
# enciphered with it, in CSRF_ALLOWED_CHARS), drawn from one os.urandom call where Django's
# get_random_string asks the system for each character (64 calls, a tenth of a millisecond).
# A random byte below the largest multiple of the alphabet's size maps to a character
# (``bytes.translate``); the bytes above it are dropped, so every character is as likely.
_CSRF_SIZE = len(CSRF_ALLOWED_CHARS)
_CSRF_KEPT = 256 - 256 % _CSRF_SIZE
_CSRF_TABLE = bytes(ord(CSRF_ALLOWED_CHARS[byte % _CSRF_SIZE]) for byte in range(_CSRF_KEPT))
_CSRF_TABLE += bytes(256 - _CSRF_KEPT)
_CSRF_DROPPED = bytes(range(_CSRF_KEPT, 256))
_CSRF_CIPHER = {
    (secret, mask): CSRF_ALLOWED_CHARS[(i + j) % _CSRF_SIZE]
    for i, secret in enumerate(CSRF_ALLOWED_CHARS)
    for j, mask in enumerate(CSRF_ALLOWED_CHARS)
}


def _csrf_string(length: int = CSRF_SECRET_LENGTH) -> str:
    drawn = b""
    while len(drawn) < length:
        drawn += os.urandom(2 * length).translate(_CSRF_TABLE, _CSRF_DROPPED)
    return drawn[:length].decode("ascii")


def csrf_form_token(request: HttpRequest) -> str:
    """``django.middleware.csrf.get_token`` for a form on a shared copy: this reader's CSRF
    secret (a new one, sent in the CSRF cookie as ``get_token`` sends it, when they have
    none), masked afresh for this response. Unlike ``get_token`` it does not send again a
    cookie the reader already has (Django does so to renew its year-long expiry: every page
    built by a template still does)."""
    secret = request.META.get("CSRF_COOKIE")
    if secret is None:
        secret = _csrf_string()
        request.META.update(CSRF_COOKIE=secret, CSRF_COOKIE_NEEDS_UPDATE=True)
    mask = _csrf_string()
    return mask + "".join(map(_CSRF_CIPHER.__getitem__, zip(secret, mask, strict=True)))


def _personal_header(request: HttpRequest, user: Any) -> str | None:
    """This reader's site header: ``base.html`` rendered for them, header cut out; kept
    per reader and path in this process for ``HEADER_S`` seconds with a placeholder for
    the CSRF token, which is masked afresh for each response (``csrf_form_token``)."""
    key = (user.pk, user.get_username(), user.is_staff, user.is_superuser, request.path)
    now = time.monotonic()
    kept = _HEADERS.get(key)
    if kept is None or now - kept[0] > HEADER_S:
        page = render_to_string("base.html", {"csrf_token": _CSRF_PLACEHOLDER}, request=request)
        start = page.find(HEADER_OPEN)
        end = page.find(HEADER_CLOSE, start)
        if start < 0 or end < 0:
            return None
        if len(_HEADERS) >= HEADERS_KEPT:
            _HEADERS.clear()
        kept = _HEADERS[key] = (now, page[start : end + len(HEADER_CLOSE)])
    header = kept[1]
    if _CSRF_PLACEHOLDER in header:
        header = header.replace(_CSRF_PLACEHOLDER, csrf_form_token(request))
    return header


def session_reader(request: HttpRequest) -> Any:
    """``request.user`` as Django's ``get_user`` finds it, without its database query on
    most requests: the user found for this session's (user id, password hash, backend) is
    kept in this process for ``READER_S`` seconds. The session itself is read on every
    request, so a log-out counts at once; a change to the account (deactivated, renamed,
    made staff, a new password) reaches these pages' header and choices, and the API's
    reads by session (``atrex_site.api.authentication``), within ``READER_S``. Used to
    serve shared copies and safe API requests: a page built for the reader, and every
    write, sees ``request.user`` itself."""
    session = request.session
    key = (
        session.get(SESSION_KEY),
        session.get(HASH_SESSION_KEY),
        session.get(BACKEND_SESSION_KEY),
    )
    if key[0] is None:
        return AnonymousUser()
    now = time.monotonic()
    kept = _READERS.get(key)
    if kept is not None and now - kept[0] <= READER_S:
        return kept[1]
    user = request.user
    if user.is_authenticated:
        if len(_READERS) >= HEADERS_KEPT:
            _READERS.clear()
        _READERS[key] = (now, user)
    return user


_KEPT_PER_PROCESS: list[dict] = [_READERS, _HEADERS]


def kept_per_process(memo: dict) -> dict:
    """Register a dict that a module keeps per process about readers (``forget_readers``
    empties it too); returns it."""
    _KEPT_PER_PROCESS.append(memo)
    return memo


def forget_readers() -> None:
    """Drop the readers, headers, kept entries and whatever else ``kept_per_process`` this
    process keeps (tests)."""
    for memo in _KEPT_PER_PROCESS:
        memo.clear()
    _ENTRIES.clear()


_HEADER_OPEN_BYTES, _HEADER_CLOSE_BYTES = HEADER_OPEN.encode(), HEADER_CLOSE.encode()


def _with_header(kept: Any, request: HttpRequest, user: Any) -> Any | None:
    """The shared copy with this reader's site header, or None when it cannot be made.
    (Spliced as bytes: the page, UTF-8 like every page of the site, is not decoded.)"""
    status, headers, content = kept
    if not headers.get("Content-Type", "").startswith("text/html"):
        return kept  # a download: no header, the same bytes for everyone
    start = content.find(_HEADER_OPEN_BYTES)
    end = content.find(_HEADER_CLOSE_BYTES, start)
    header = _personal_header(request, user)
    if start < 0 or end < 0 or header is None:
        return None
    page = content[:start] + header.encode() + content[end + len(_HEADER_CLOSE_BYTES) :]
    return status, headers, page


def shared_page(
    view: Callable[..., HttpResponse] | None = None,
    *,
    personal: Callable[..., bool] | None = None,
) -> Any:
    """Serve a Django view's GET from the shared copy (see the module), to every reader
    for whom the page differs only in the site header. ``personal(reader, *args,
    request=request, **kwargs)``: True when the page could show this signed-in reader more
    (their own submission); the page is then built for them alone. Staff always are. Use
    as ``shared_page(view)`` or ``shared_page(view, personal=...)``."""
    if view is None:
        return lambda inner: shared_page(inner, personal=personal)

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not _seconds() or request.method not in ("GET", "HEAD"):
            return view(request, *args, **kwargs)
        key = page_key(request)
        if settings.SESSION_COOKIE_NAME not in request.COOKIES:
            # No session: the page is the anonymous one (an Authorization header does not
            # sign anyone in to a page).
            kept, state = _shared_page(view, request, args, kwargs, key=key)
            return copy_response(kept, state)
        found = _read_with_session(request, shared_key(key))
        user = session_reader(request)
        if (
            user.is_staff
            or len(get_messages(request))
            or (
                user.is_authenticated
                and personal
                and personal(user, *args, request=request, **kwargs)
            )
        ):
            return view(request, *args, **kwargs)
        kept, state = _shared_page(view, request, args, kwargs, key=key, found=found)
        if isinstance(kept, HttpResponse):
            return view(request, *args, **kwargs)  # not shareable: build it for this reader
        if user.is_authenticated:
            kept = _with_header(kept, request, user)
            if kept is None:
                return view(request, *args, **kwargs)
        return copy_response(kept, state)

    return wrapper
