"""Pieces for the what-if settings in bench/ (A/B runs of bench/run.py only; the app does not use them).

Each stands in for a fix proposed in bench/HISTORY.md, so its gain can be measured before anyone
changes the application.
"""

import redis


class SyncBoundaryMiddleware:
    """A sync-only, do-nothing middleware placed last in MIDDLEWARE.

    Under ASGI Django builds the middleware chain from the inside out and switches between async
    and sync wherever a middleware cannot run in the current mode. WhiteNoise is sync-only, so
    today the chain is: thread -> WhiteNoise -> back to the event loop -> six MiddlewareMixin
    middlewares in async mode, each running its process_request/process_response through
    sync_to_async -> the sync view in a thread. With a sync-only middleware innermost, the whole
    chain runs in one thread and only the view call crosses back.
    """

    sync_capable = True
    async_capable = False

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)


class SharedConnectionPool(redis.ConnectionPool):
    """One Redis connection pool per process and URL.

    Django keeps cache objects per async context, so under ASGI every request gets a fresh
    RedisCache with a fresh pool and opens a new TCP connection to Redis (redis-py then also
    reads package metadata from disk for CLIENT SETINFO). Sharing the pool reuses connections.
    """

    _shared: dict = {}

    @classmethod
    def from_url(cls, url, **kwargs):
        key = (url, tuple(sorted(kwargs.items())))
        pool = cls._shared.get(key)
        if pool is None:
            pool = cls._shared[key] = super().from_url(url, **kwargs)
        return pool
