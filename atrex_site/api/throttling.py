"""Rate limits of the API: per client address (anonymous) and per user.

DRF's classes read the rates once, when they are imported; these read
``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]`` on each request, so that the settings in force
(and a test's override) apply.

With Redis as the cache (production), the count is one round trip: a script run in Redis
keeps each client's requests of the last period as a sorted set (drop those older than the
period, count, add this one if under the rate) and answers with the wait when over it.
That is DRF's rule (at most N requests in any period's span, refused requests not counted)
made atomic, where DRF's reads the whole list of timestamps and writes it back (two round
trips, the list pickled both ways, and two processes at once can both count under the
rate). Retry-After is the time until the oldest counted request leaves the period, when
one more will pass. With another cache (development, tests: the per-process memory cache)
DRF's own counting is used.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.core.cache import cache
from rest_framework.throttling import AnonRateThrottle, SimpleRateThrottle, UserRateThrottle

# KEYS[1]: the client's sorted set; ARGV: the rate's number of requests, its period (s), a
# unique member for this request. Redis's clock, so that every web process counts alike.
# Answers {1, "0"} (allowed, counted) or {0, the wait in seconds}.
SLIDING_LOG = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local limit = tonumber(ARGV[1])
local period = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - period)
if redis.call('ZCARD', KEYS[1]) < limit then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('EXPIRE', KEYS[1], math.ceil(period))
  return {1, '0'}
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {0, tostring(tonumber(oldest[2]) + period - now)}
"""
_SCRIPTS: dict[int, Any] = {}


def _rate(scope: str) -> str | None:
    return settings.REST_FRAMEWORK.get("DEFAULT_THROTTLE_RATES", {}).get(scope)


def _sliding_log(client: Any) -> Any:
    """The script registered for ``client`` (redis-py sends its digest, and the script
    itself only when Redis does not hold it yet)."""
    script = _SCRIPTS.get(id(client))
    if script is None:
        script = _SCRIPTS[id(client)] = client.register_script(SLIDING_LOG)
    return script


class _OneTripThrottle(SimpleRateThrottle):
    """``SimpleRateThrottle`` counted in Redis in one round trip where the cache is Redis."""

    _wait_s: float | None = None

    def get_rate(self) -> str | None:
        return _rate(self.scope)

    def allow_request(self, request, view) -> bool:
        client = getattr(cache, "redis_client", None)
        if client is None:
            self.cache = cache  # the cache in force (DRF's is bound when it is imported)
            return super().allow_request(request, view)
        if self.rate is None:
            return True
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        redis = client()
        allowed, wait_s = _sliding_log(redis)(
            # Not DRF's key: a process still counting DRF's way (a rolling deploy) would
            # find a sorted set where it expects a list, and fail.
            keys=[cache.make_key(f"sliding-log:{self.key}")],
            args=[self.num_requests, self.duration, uuid.uuid4().hex],
            client=redis,
        )
        self._wait_s = float(wait_s)
        return bool(allowed)

    def wait(self) -> float | None:
        if self._wait_s is not None:
            return max(self._wait_s, 0.001)  # Retry-After: at least 1 s once rounded up
        return super().wait()


class AnonThrottle(_OneTripThrottle, AnonRateThrottle):
    pass


class UserThrottle(_OneTripThrottle, UserRateThrottle):
    pass
