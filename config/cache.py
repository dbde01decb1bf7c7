"""One cache client per process, and a Redis cache backend that is cheap to call.

``django.core.cache.cache`` is per thread (and per async context). Under ASGI every
request runs on a new thread, so each request would build a new Redis client and open a
new connection. Hot paths (the per-key throttle, the webhook flag) use this shared,
thread-safe instance instead.

``RedisCache`` is Django's backend with two changes for those hot paths: it reuses one
``redis.Redis`` per connection pool (Django builds a new one, with its table of response
callbacks, for every call), and ``incr_or_start`` counts in one round trip where
``incr`` + ``add`` take two or three.
"""

from functools import cache

from django.core.cache import caches
from django.core.cache.backends import redis as django_redis


@cache
def shared_cache():
    return caches.create_connection("default")


class RedisCacheClient(django_redis.RedisCacheClient):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._clients = {}

    def get_client(self, key=None, *, write=False):
        pool = self._get_connection_pool(write)
        client = self._clients.get(id(pool))
        if client is None:
            # redis.Redis over a connection pool is thread-safe: one per pool is enough.
            client = self._clients[id(pool)] = self._client(connection_pool=pool)
        return client


class RedisCache(django_redis.RedisCache):
    def __init__(self, server, params):
        super().__init__(server, params)
        self._class = RedisCacheClient

    def incr_or_start(self, key, timeout: int, version=None, amount: int = 1) -> int:
        """Add ``amount`` to the counter at ``key`` and return it; a missing counter starts at 0
        and expires ``timeout`` seconds later. One round trip (SET NX EX, then INCRBY, pipelined)."""
        key = self.make_and_validate_key(key, version=version)
        pipe = self._cache.get_client(key, write=True).pipeline(transaction=False)
        pipe.set(key, 0, ex=timeout, nx=True)
        pipe.incr(key, amount)
        return pipe.execute()[1]
