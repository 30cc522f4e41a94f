"""Copies of the public board pages for readers who carry no credentials.

The board, its API list, downloads, operator and history pages are the same for every
anonymous reader, and they are what a crowd reads. A request with no session cookie and no
``Authorization`` header (nothing that could make the page personal: private rows show to
their owner and to staff only) is answered from the cache when a copy is there.

Every copy is filed under the board's *generation*, a counter in the same cache that
anything changing what the board shows bumps: a score stored or refreshed, a submission
saved (visibility, curation flags, title), a suite version or hardware profile saved. With
a cache shared by every process (Redis in production: ``DJANGO_CACHE_URL``), a change is
visible at the next request. With the per-process default cache, a change made in another
process (a worker publishing) is seen when the copy expires: ``ATREX["PUBLIC_PAGE_CACHE_S"]``
seconds at most (0 turns the cache off).

It lives here, beside the settings, because the board (``leaderboard``) and the
submission pages (``submissions``) both use it, and ``submissions`` must not import the
board; ``leaderboard``'s app config connects the signals that bump the generation.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse

GENERATION_KEY = "atrex:board-generation"
_KEPT_HEADERS = ("Content-Type", "Content-Disposition", "Content-Language")


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
    """Retire every cached page (a signal receiver, also called by services directly)."""
    try:
        cache.incr(GENERATION_KEY)
    except ValueError:  # no counter yet (or evicted): start one past any earlier value
        cache.set(GENERATION_KEY, int(time.time() * 1000), None)


def _anonymous(request: HttpRequest) -> bool:
    return (
        request.method in ("GET", "HEAD")
        and "HTTP_AUTHORIZATION" not in request.META
        and settings.SESSION_COOKIE_NAME not in request.COOKIES
    )


def cached_for_anonymous(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Serve ``view`` from the cache to readers without credentials (see the module)."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        seconds = _seconds()
        if not seconds or not _anonymous(request):
            return view(request, *args, **kwargs)
        path = hashlib.sha256(request.get_full_path().encode()).hexdigest()
        key = f"atrex:page:{board_generation()}:{request.method}:{path}"
        kept = cache.get(key)
        if kept is not None:
            status, headers, content = kept
            response = HttpResponse(content, status=status)
            for name, value in headers.items():
                response[name] = value
            response["X-Atrex-Cache"] = "hit"
            return response
        response = view(request, *args, **kwargs)
        if hasattr(response, "render") and callable(response.render):
            response = response.render()  # DRF and template responses render lazily
        if response.status_code == 200 and not response.streaming and not response.cookies:
            headers = {name: response[name] for name in _KEPT_HEADERS if name in response}
            cache.set(key, (response.status_code, headers, response.content), seconds)
            response["X-Atrex-Cache"] = "miss"
        return response

    return wrapper
