"""What-if settings for A/B runs of bench/run.py (--settings bench.settings_pool); not used by the app.

Production settings with Django's own psycopg connection pool (Django 5.1+, needs the
psycopg-pool package): each request borrows a connection and gives it back, so there is neither
a connection per request nor a leak. CONN_MAX_AGE must be 0 with a pool.
"""

from config.settings.production import *  # noqa: F403

DATABASES["default"]["CONN_MAX_AGE"] = 0  # noqa: F405
DATABASES["default"]["CONN_HEALTH_CHECKS"] = False  # noqa: F405
DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {"min_size": 4, "max_size": 20, "timeout": 10}  # noqa: F405
