"""Django's Redis cache backend, keeping one ``redis.Redis`` client per connection pool.

Django's ``RedisCacheClient`` makes a new ``redis.Redis`` for every operation, and each one
builds redis-py's table of ~170 response callbacks: about a third of a millisecond of CPU
per cache read here. A public page served from its shared copy costs two or three cache
operations (the session, the copy, the API's rate-limit counters), so that was most of
what serving it cost. A client is safe to share between threads: connections come from
its pool. ``DJANGO_CACHE_URL=redis://…`` selects this backend (settings/base.py).
"""

from __future__ import annotations

from typing import Any

from django.core.cache.backends.redis import RedisCache as DjangoRedisCache
from django.core.cache.backends.redis import RedisCacheClient


class _ReusedClient(RedisCacheClient):
    def get_client(self, key: Any = None, *, write: bool = False) -> Any:
        pool = self._get_connection_pool(write)
        clients = self.__dict__.setdefault("_clients", {})
        client = clients.get(id(pool))
        if client is None:
            client = clients[id(pool)] = self._client(connection_pool=pool)
        return client


class RedisCache(DjangoRedisCache):
    def __init__(self, server: Any, params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = _ReusedClient

    def redis_client(self) -> Any:
        """The ``redis.Redis`` client of this cache's primary, for what the cache's API
        cannot say in one round trip (atrex_site/api/throttling.py)."""
        return self._cache.get_client(write=True)
