"""What one request asks of Redis, in one round trip: that its credential is still the one
this process knows, the API's rate limits counted, and the values it reads (the board's
generation and the shared copy).

A Redis round trip costs this client a tenth to a quarter of a millisecond of CPU, about
what the rest of a request served from a shared copy costs; a signed-in or API request
made three (the session or the token, the rate limit, the copy) where an anonymous page
made one. ``trip`` makes them one script run (``REQUEST_SCRIPT``):

1. the credential (a session's or a token's entry in the cache) is compared, by its
   SHA-1, with the entry this process read before; if it changed or is gone (a log-out, a
   revoke's tombstone, an expiry), the script stops there, counts nothing and answers the
   entry, and the caller takes the ordinary path;
2. each rate limit is counted as ``atrex_site.api.throttling`` counts it (a sorted set of
   the period's requests: at most N in any period's span, refused requests not counted);
3. the keys to read are read (MGET).

``read`` is step 3 alone (a plain MGET), for any cache. Values are decoded as Django's
Redis backend stores them (integers as they are, everything else pickled). Only the Redis
backend of ``atrex_site.redis_cache`` can run a trip (``available``); with another cache
(the per-process memory cache of development and most tests) callers use the cache's API.
"""

from __future__ import annotations

import hashlib
import pickle
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.core.cache import DEFAULT_CACHE_ALIAS, cache, caches

# KEYS: [the credential's key (when ARGV[1] is '1')], then each rate limit's sorted set, then
# the keys to read. ARGV: [1] '1' when a credential is checked, [2] its expected SHA-1,
# [3] the number of rate limits, [4] a member unique to this request, then per rate limit
# its number of requests and its period (s). Redis's clock, so that every process counts
# alike. Answers {0, the credential's entry} when the credential is not the expected one
# (nothing counted or read), else {1, per rate limit 'ok' (counted) or the seconds until
# one more passes, the values read}.
REQUEST_SCRIPT = """
local first = 1
if ARGV[1] == '1' then
  local credential = redis.call('GET', KEYS[1])
  if (not credential) or redis.sha1hex(credential) ~= ARGV[2] then
    return {0, credential}
  end
  first = 2
end
local limits = tonumber(ARGV[3])
local waits = {}
if limits > 0 then
  local clock = redis.call('TIME')
  local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
  for i = 0, limits - 1 do
    local key = KEYS[first + i]
    local limit = tonumber(ARGV[5 + 2 * i])
    local period = tonumber(ARGV[6 + 2 * i])
    redis.call('ZREMRANGEBYSCORE', key, '-inf', now - period)
    if redis.call('ZCARD', key) < limit then
      redis.call('ZADD', key, now, ARGV[4])
      redis.call('EXPIRE', key, math.ceil(period))
      waits[i + 1] = 'ok'
    else
      local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
      waits[i + 1] = tostring(tonumber(oldest[2]) + period - now)
    end
  end
end
local values = {}
if #KEYS >= first + limits then
  values = redis.call('MGET', unpack(KEYS, first + limits))
end
return {1, waits, values}
"""
_SCRIPTS: dict[int, Any] = {}


@dataclass(frozen=True)
class RateLimit:
    """One rate limit to count: its key in the cache (before the cache's prefix), the number
    of requests it lets through per ``period_s``."""

    key: str
    requests: int
    period_s: float


@dataclass(frozen=True)
class Credential:
    """A credential's entry in the cache (key before the cache's prefix) and the SHA-1 of
    the entry this process read before ('' when it read none)."""

    key: str
    sha1: str


@dataclass
class Trip:
    """What a ``trip`` found. ``credential_ok`` False: the credential's entry was not the
    expected one (``entry``: the raw entry now, None when there is none), and nothing was
    counted or read. Otherwise ``waits`` (per rate limit: None when counted, else the
    seconds until one more passes) and ``values`` (per key read, decoded; None if absent)."""

    credential_ok: bool
    entry: bytes | None = None
    waits: list[float | None] | None = None
    values: list[Any] | None = None


def available() -> bool:
    """Whether the default cache can run a trip (the Redis backend)."""
    return hasattr(cache, "redis_client")


def sha1(entry: bytes) -> str:
    """An entry's SHA-1 as Redis's ``redis.sha1hex`` writes it."""
    return hashlib.sha1(entry, usedforsecurity=False).hexdigest()


def decode(raw: bytes | None) -> Any:
    """A value as Django's Redis backend stored it (``RedisSerializer``): integers as they
    are, the rest pickled."""
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        return pickle.loads(raw)  # noqa: S301 - the site's own cache, as Django reads it


def read(keys: Sequence[str]) -> list[Any]:
    """The values of ``keys`` (None where absent), in one round trip (MGET on Redis, without
    the backend's per-key checks; ``get_many`` on another cache)."""
    backend = caches[DEFAULT_CACHE_ALIAS]  # once: each use of the ``cache`` proxy looks it up
    if not hasattr(backend, "redis_client"):
        found = backend.get_many(list(keys))
        return [found.get(key) for key in keys]
    raw = backend.redis_client().mget([backend.make_key(key) for key in keys])
    return [decode(value) for value in raw]


def trip(
    *,
    credential: Credential | None = None,
    limits: Sequence[RateLimit] = (),
    reads: Sequence[str] = (),
) -> Trip:
    """One script run: check ``credential``, then count ``limits`` and read ``reads`` (see
    the module). Only where ``available()``."""
    backend = caches[DEFAULT_CACHE_ALIAS]
    client = backend.redis_client()
    script = _SCRIPTS.get(id(client))
    if script is None:
        # redis-py sends the script's digest, and the script only when Redis lacks it.
        script = _SCRIPTS[id(client)] = client.register_script(REQUEST_SCRIPT)
    keys = [] if credential is None else [backend.make_key(credential.key)]
    keys += [backend.make_key(limit.key) for limit in limits]
    keys += [backend.make_key(key) for key in reads]
    args: list[Any] = [
        "0" if credential is None else "1",
        "" if credential is None else credential.sha1,
        len(limits),
        uuid.uuid4().hex,
    ]
    for limit in limits:
        args += [limit.requests, limit.period_s]
    answer = script(keys=keys, args=args, client=client)
    if not answer[0]:
        return Trip(credential_ok=False, entry=answer[1])
    waits = [None if wait == b"ok" else float(wait) for wait in answer[1]]
    return Trip(credential_ok=True, waits=waits, values=[decode(value) for value in answer[2]])
