"""Settings for pytest. DATABASE_URL decides SQLite (default) or PostgreSQL."""

import os

from .base import *  # noqa: F403

DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES["staticfiles"] = {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}  # noqa: F405

# Two suites running side by side (two checkouts, or a developer and CI) need their own
# test databases: TEST_DB_SUFFIX tells them apart.
_suffix = os.environ.get("TEST_DB_SUFFIX", "")
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":  # noqa: F405
    # Threads in concurrency tests need their own connections to one database: a file, not :memory:.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test{_suffix}.sqlite3")}  # noqa: F405
else:
    DATABASES["default"]["TEST"] = {"NAME": f"test_{DATABASES['default']['NAME']}{_suffix}"}  # noqa: F405
DATABASES["default"]["CONN_MAX_AGE"] = 0  # noqa: F405
# Concurrency tests hold one connection per thread (16 and more at once).
_pool = DATABASES["default"].get("OPTIONS", {}).get("pool")  # noqa: F405
if isinstance(_pool, dict):
    _pool["max_size"] = max(_pool.get("max_size", 0), 40)
# Every request looks its key up, so query counts are the same however fast a test runs;
# tests/sessions_app/test_api_key_cache.py turns the cache on where it is the subject.
API_KEY_CACHE_SECONDS = 0

# The embedded broker's folders are per suite too, so a worker started by one suite never
# takes another suite's messages.
if not REDIS_URL:  # noqa: F405
    _broker = VAR_DIR / f"broker{_suffix}"  # noqa: F405
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker / "queue"),
        # Fanout (worker control) messages; kombu would otherwise write ./control/ in the cwd.
        "control_folder": str(_broker / "control"),
        "data_folder_out": str(_broker / "queue"),
        "processed_folder": str(_broker / "processed"),
        "store_processed": False,
    }
    CELERY_RESULT_BACKEND = f"file://{_broker / 'results'}"
# Serve static files from the apps' folders, no collectstatic needed.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True
