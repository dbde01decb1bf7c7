"""Per-key rate limit as a fixed-window counter in the cache.

DRF's SimpleRateThrottle keeps a list of every request time per key; at thousands of
requests a second that list is rewritten on every call. A counter per window costs one
atomic ``incr`` (on Redis, one pipelined round trip: ``RedisCache.incr_or_start``).
"""

import time

from django.conf import settings
from rest_framework.throttling import BaseThrottle

from config.cache import RedisCache, shared_cache

_PERIODS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hour": 3600, "d": 86400, "day": 86400}


def parse_rate(rate: str) -> tuple[int, int]:
    number, _, period = rate.partition("/")
    return int(number), _PERIODS[period]


class ApiKeyRateThrottle(BaseThrottle):
    def allow_request(self, request, view) -> bool:
        key = request.auth
        prefix = getattr(key, "prefix", None)
        if not prefix:
            return True  # people on a browser session are not throttled here
        limit, period = parse_rate(settings.API_KEY_THROTTLE_RATE)
        window = int(time.time() // period)
        cache_key = f"throttle:{prefix}:{window}"
        store = shared_cache()
        if isinstance(store, RedisCache):
            count = store.incr_or_start(cache_key, period + 1)  # one round trip
        else:
            try:
                count = store.incr(cache_key)
            except ValueError:  # the window's first request, or the key just expired
                count = 1 if store.add(cache_key, 1, timeout=period + 1) else store.incr(cache_key)
        self._wait = period - (time.time() % period)
        return count <= limit

    def wait(self) -> float | None:
        return getattr(self, "_wait", None)
