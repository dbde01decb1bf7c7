"""What-if settings for A/B runs of bench/run.py (--settings bench.settings_tuned); not used by the app.

bench.settings_pool (pooled database connections) plus the two other configuration-level fixes
proposed in bench/HISTORY.md, stood in for by bench/whatif.py: one Redis connection pool per
process, and a middleware chain that runs in one thread.
"""

from bench.settings_pool import *  # noqa: F403

if CACHES["default"]["BACKEND"] == "django.core.cache.backends.redis.RedisCache":  # noqa: F405
    CACHES["default"].setdefault("OPTIONS", {})["pool_class"] = "bench.whatif.SharedConnectionPool"  # noqa: F405
MIDDLEWARE = [*MIDDLEWARE, "bench.whatif.SyncBoundaryMiddleware"]  # noqa: F405
