"""One cache client per process.

``django.core.cache.cache`` is per thread (and per async context). Under ASGI every
request runs on a new thread, so each request would build a new Redis client and open a
new connection. Hot paths (the per-key throttle, the webhook flag) use this shared,
thread-safe instance instead.
"""

from functools import cache

from django.core.cache import caches


@cache
def shared_cache():
    return caches.create_connection("default")
