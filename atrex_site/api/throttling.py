"""Rate limits of the API: per client address (anonymous) and per user.

DRF's classes read the rates once, when they are imported; these read
``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]`` on each request, so that the settings in force
(and a test's override) apply.

With Redis as the cache (production), the count is part of the request's one round trip
(``atrex_site.one_trip``): a script run in Redis keeps each client's requests of the last
period as a sorted set (drop those older than the period, count, add this one if under the
rate) and answers with the wait when over it. That is DRF's rule (at most N requests in
any period's span, refused requests not counted) made atomic, where DRF's reads the whole
list of timestamps and writes it back (two round trips, the list pickled both ways, and two
processes at once can both count under the rate). Retry-After is the time until the oldest
counted request leaves the period, when one more will pass. A request served from a shared
copy before DRF runs (``atrex_site.api.shared.shared_api``) is counted in that same trip,
and if it goes on to the view, its counts are handed over (``request.atrex_counted``) so
that no request is counted twice. With another cache (development, tests: the per-process
memory cache) DRF's own counting is used.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from django.conf import settings
from django.core.cache import cache
from rest_framework.throttling import AnonRateThrottle, SimpleRateThrottle, UserRateThrottle

from atrex_site import one_trip


def _rate(scope: str) -> str | None:
    return settings.REST_FRAMEWORK.get("DEFAULT_THROTTLE_RATES", {}).get(scope)


class _OneTripThrottle(SimpleRateThrottle):
    """``SimpleRateThrottle`` counted in Redis in one round trip where the cache is Redis."""

    _wait_s: float | None = None

    def get_rate(self) -> str | None:
        return _rate(self.scope)

    def rate_limit(self, request: Any) -> one_trip.RateLimit | None:
        """What this throttle counts for ``request`` (anything with ``user`` and ``META``),
        or None when it counts nothing for it."""
        if self.rate is None:
            return None
        self.key = self.get_cache_key(request, None)
        if self.key is None:
            return None
        # Not DRF's key: a process still counting DRF's way (a rolling deploy) would find a
        # sorted set where it expects a list, and fail.
        return one_trip.RateLimit(f"sliding-log:{self.key}", self.num_requests, self.duration)

    def allow_request(self, request, view) -> bool:
        if not one_trip.available():
            self.cache = cache  # the cache in force (DRF's is bound when it is imported)
            return super().allow_request(request, view)
        limit = self.rate_limit(request)
        if limit is None:
            return True
        counted = getattr(getattr(request, "_request", request), "atrex_counted", None) or {}
        if limit.key in counted:  # counted already, in the request's trip
            self._wait_s = counted[limit.key]
        else:
            (self._wait_s,) = one_trip.trip(limits=[limit]).waits  # type: ignore[misc]
        return self._wait_s is None

    def wait(self) -> float | None:
        if self._wait_s is not None:
            return max(self._wait_s, 0.001)  # Retry-After: at least 1 s once rounded up
        return super().wait()


class AnonThrottle(_OneTripThrottle, AnonRateThrottle):
    pass


class UserThrottle(_OneTripThrottle, UserRateThrottle):
    pass


class _Headers:
    """``request.headers.get`` read from ``META`` (Django's ``HttpHeaders`` parses every
    header of the request to build itself; a throttle asks for one)."""

    def __init__(self, meta: dict[str, Any]) -> None:
        self.meta = meta

    def get(self, name: str, default: Any = None) -> Any:
        return self.meta.get("HTTP_" + name.upper().replace("-", "_"), default)


def rate_limits(
    throttle_classes: Sequence[type], *, user: Any, request: Any
) -> list[one_trip.RateLimit]:
    """What ``throttle_classes`` (each a ``_OneTripThrottle``) count for ``request`` (a
    Django request) made by ``user``, keys as their ``allow_request`` makes them."""
    counted = SimpleNamespace(user=user, META=request.META, headers=_Headers(request.META))
    found = [throttle().rate_limit(counted) for throttle in throttle_classes]
    return [limit for limit in found if limit is not None]


def one_trip_throttles(throttle_classes: Sequence[type]) -> bool:
    """Whether every one of ``throttle_classes`` counts as this module does."""
    return all(issubclass(throttle, _OneTripThrottle) for throttle in throttle_classes)
