"""API answers that are the same for every reader, shared between requests as rendered JSON
(a copy of ``atrex_site.page_cache``, under the key of the request's absolute URL).

* ``shared_answer`` (in the view): the answer whose body is built once per board
  generation; authentication, throttling and content negotiation run per request as DRF
  runs them.
* ``shared_api`` (around the view, in the URLs): serves that copy before DRF runs, in one
  round trip to Redis (``atrex_site.one_trip``) that also checks the reader's credential
  and counts their rate limits, so that a request with a token or a session costs what an
  anonymous one does. The copy is served only to a reader who gets what everyone gets
  (not staff) and only while fresh; otherwise, or where the trip cannot say who the reader
  is, the view runs, with the counts already made handed over (never counted twice).

The reader, as ``shared_api`` finds it:

* without credentials: counted per client address (``AnonThrottle``, ``UserThrottle``);
* ``Authorization: Token …``: the token's entry in the cache (``accounts.services``) must be
  the entry this process read before, byte for byte (its SHA-1, compared in Redis): a
  revoke's tombstone, an expiry of the entry, a new entry fail the check, and the view
  answers as usual (401 for a revoked token). The kept token's expiry and its user's
  ``is_active`` are checked on each request, as ``ApiTokenAuthentication`` does;
* a session cookie: the session's entry in the cache, checked the same way (a log-out
  deletes it); its user is found as the shared pages find it (``session_reader``), and is
  counted under the user id the session holds.

A process learns an entry (``_KNOWN``) from the trip that failed its check, which answers
the entry; that request runs the view. With a cache other than Redis every request runs
the view.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib.auth import SESSION_KEY
from django.contrib.auth.models import AnonymousUser
from django.http import HttpRequest, HttpResponse
from rest_framework.authentication import get_authorization_header
from rest_framework.permissions import AllowAny, IsAuthenticatedOrReadOnly
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.models import ApiToken
from accounts.services import token_cache_key, token_digest
from atrex_site import one_trip, page_cache

from .throttling import one_trip_throttles, rate_limits

_JSON = "application/json"
_READ_BY_ANYONE = (AllowAny, IsAuthenticatedOrReadOnly)
# Credentials' entries this process read (cache key -> (SHA-1 of the entry, its value)).
_KNOWN: dict[str, tuple[str, Any]] = page_cache.kept_per_process({})


def _copy_key(request: HttpRequest) -> str:
    return page_cache.page_key(request, absolute=True)


def shared_answer(request: Request, build: Callable[[], Any]) -> HttpResponse:
    """The answer whose body ``build()`` returns (serialised data, the same for every reader
    of this URL), from the copy shared under the request's absolute URL, which must name
    everything the body depends on (``shared_api`` serves the same copy). ``build`` may
    return a response (an error, a reader's own answer), which is not shared."""

    def rendered() -> Any:
        data = build()
        if isinstance(data, HttpResponse):
            return page_cache.not_shared(data)
        return (200, {"Content-Type": _JSON}, JSONRenderer().render(data))

    kept, state = page_cache.shared_value_state(_copy_key(request._request), rendered)
    if isinstance(kept, HttpResponse):
        return kept
    if request.accepted_renderer.format == "json":
        return page_cache.copy_response(kept, state)
    response = Response(json.loads(kept[2]))  # the browsable API (development): as usual
    response["X-Atrex-Cache"] = state
    return response


def _wants_json(request: HttpRequest) -> bool:
    """Whether DRF would answer this request in JSON with any renderers: no ``format``
    asked for, and an Accept header that names no other type."""
    if "format" in request.GET:
        return False
    accept = request.META.get("HTTP_ACCEPT", "")
    return all(
        part.split(";", 1)[0].strip() in ("", "*/*", "application/*", _JSON)
        for part in accept.split(",")
    )


def _learn(key: str, entry: bytes | None, kind: type) -> None:
    """Keep the credential's entry that a trip answered, if it is one (a token, a session's
    data), for the next request's check."""
    value = one_trip.decode(entry) if entry is not None else None
    if not isinstance(value, kind):
        _KNOWN.pop(key, None)
        return
    if len(_KNOWN) >= page_cache.HEADERS_KEPT:
        _KNOWN.clear()
    _KNOWN[key] = (one_trip.sha1(entry), value)  # type: ignore[arg-type]


class _SignedIn:
    """A signed-in user to count, by id (``UserThrottle`` counts ``request.user.pk``)."""

    is_authenticated = True

    def __init__(self, pk: Any) -> None:
        self.pk = pk


class _Reader:
    """Who makes a request, as far as the trip can tell: the user to count (None: the
    credential's entry must be learnt first), the credential to check (None: none), the
    type of what its entry holds and the value this process knows."""

    def __init__(
        self,
        user: Any,
        credential: one_trip.Credential | None = None,
        kind: type = object,
        known: Any = None,
    ) -> None:
        self.user, self.credential, self.kind, self.known = user, credential, kind, known


def _reader(request: HttpRequest) -> _Reader | None:
    """The request's reader (see the module), or None where the view must find them (an
    Authorization header of another kind, a token the view refuses, a session of a kind
    that is not kept in the cache or that names no user)."""
    if "HTTP_AUTHORIZATION" in request.META:
        header = get_authorization_header(request).split()
        if len(header) != 2 or header[0].lower() != b"token" or not header[1].isascii():
            return None
        key = token_cache_key(token_digest(header[1].decode("ascii")))
        known = _KNOWN.get(key)
        if known is None:
            return _Reader(None, one_trip.Credential(key, ""), ApiToken)
        sha1, token = known
        if not token.is_active or not token.user.is_active:
            return None  # expired since, or a disabled account: the view refuses it
        return _Reader(token.user, one_trip.Credential(key, sha1), ApiToken, token)
    if settings.SESSION_COOKIE_NAME in request.COOKIES:
        key = page_cache.session_cache_key(request)
        if key is None:
            return None
        known = _KNOWN.get(key)
        if known is None:
            return _Reader(None, one_trip.Credential(key, ""), dict)
        sha1, data = known
        if data.get(SESSION_KEY) is None:
            return None
        # Counted under the id the session holds, as the user it names is; that user is
        # found once the trip has shown the session to be current.
        return _Reader(_SignedIn(data[SESSION_KEY]), one_trip.Credential(key, sha1), dict, data)
    return _Reader(AnonymousUser())


def _from_copy(request: HttpRequest, throttle_classes: list[type]) -> HttpResponse | None:
    """The shared copy for this request, after its one trip; None: the view answers."""
    reader = _reader(request)
    if reader is None:
        return None
    credential = reader.credential
    if reader.user is None:  # learn the credential's entry; the view answers this time
        found = one_trip.trip(credential=credential)
        _learn(credential.key, found.entry, reader.kind)  # type: ignore[union-attr]
        return None
    key = _copy_key(request)
    limits = rate_limits(throttle_classes, user=reader.user, request=request)
    found = one_trip.trip(
        credential=credential,
        limits=limits,
        reads=[page_cache.GENERATION_KEY, page_cache.stamp_key(page_cache.shared_key(key))],
    )
    if not found.credential_ok:
        _learn(credential.key, found.entry, reader.kind)  # type: ignore[union-attr]
        return None
    # Counted: the view, if it runs, must not count these again.
    request.atrex_counted = {  # type: ignore[attr-defined]
        limit.key: wait
        for limit, wait in zip(limits, found.waits, strict=True)  # type: ignore[arg-type]
    }
    if any(wait is not None for wait in found.waits):  # type: ignore[union-attr]
        return None  # over a rate: the view answers 429
    user = reader.user
    if reader.kind is dict:  # the session is the one known: no need to read it again
        page_cache.session_prime(request, dict(reader.known))
        user = page_cache.session_reader(request)
        if not user.is_authenticated or not user.is_active or str(user.pk) != str(reader.user.pk):
            return None
    if user.is_authenticated and user.is_staff:
        return None  # staff may be shown more (hidden shapes): the view decides
    kept = page_cache.fresh_copy(key, *found.values)  # type: ignore[misc]
    if kept is None:
        return None  # the view reads it, builds it, or serves the previous copy meanwhile
    return page_cache.copy_response(kept, "hit")


def shared_api(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Serve an APIView whose GET answers with ``shared_answer`` from the shared copy
    before DRF runs, to every reader it is the same for (see the module). Its throttles
    must count as ``atrex_site.api.throttling`` does, and its permissions let any reader
    read."""
    view_class = view.view_class  # type: ignore[attr-defined]
    throttle_classes = list(view_class.throttle_classes)
    if not one_trip_throttles(throttle_classes):
        raise TypeError(f"{view_class.__name__}: shared_api counts one-trip throttles only")
    if not all(issubclass(p, _READ_BY_ANYONE) for p in view_class.permission_classes):
        raise TypeError(f"{view_class.__name__}: shared_api serves views anyone may read")
    json_only = all(issubclass(renderer, JSONRenderer) for renderer in view_class.renderer_classes)

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if (
            request.method in ("GET", "HEAD")
            and page_cache.sharing_on()
            and one_trip.available()
            and (json_only or _wants_json(request))
        ):
            answer = _from_copy(request, throttle_classes)
            if answer is not None:
                return answer
        return view(request, *args, **kwargs)

    return wrapper
