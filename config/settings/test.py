"""Settings for pytest. DATABASE_URL decides SQLite (default) or PostgreSQL."""

import os
from urllib.parse import urlsplit, urlunsplit

from config.env import env_path, env_paths, env_str


def _xdist_worker_environment() -> None:
    """Under pytest-xdist (``make test`` runs ``-n``), each worker process is a suite of its own:
    its own TEST_DB_SUFFIX (databases, broker folders, file roots under var/) and, on Redis, its
    own Redis database (the cache is cleared between tests, the channel layer's groups and the
    Celery queue are shared by everything on one database). Written to the environment before the
    base settings read it, so the processes a test starts (workers, servers, runners) inherit the
    same; done once, so a child that still sees PYTEST_XDIST_WORKER adds nothing twice."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # "gw0", "gw1", ... set by pytest-xdist
    suffix = os.environ.get("TEST_DB_SUFFIX", "")
    if not worker or suffix.endswith(f"_{worker}"):
        return
    os.environ["TEST_DB_SUFFIX"] = f"{suffix}_{worker}"
    redis_url = os.environ.get("REDIS_URL", "")
    if redis_url:
        # redis://host:port/15 -> /15 for gw0, /14 for gw1, ... (Redis has databases 0-15)
        parts = urlsplit(redis_url)
        number = int(parts.path.strip("/") or 0) - int(worker.removeprefix("gw"))
        os.environ["REDIS_URL"] = urlunsplit(parts._replace(path=f"/{number % 16}"))


_xdist_worker_environment()

from .base import *  # noqa: E402, F403

DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES["staticfiles"] = {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}  # noqa: F405

# Two suites running side by side (two checkouts, or a developer and CI) need their own
# test databases: TEST_DB_SUFFIX tells them apart.
_suffix = os.environ.get("TEST_DB_SUFFIX", "")
# Everything a test run writes lives under var/test<suffix>/, never where `make run` keeps its
# state (var/ itself): a suite started beside a running dev server shares none of its database,
# broker folders or file roots. tests/config/test_test_settings.py holds this.
TEST_VAR_DIR = VAR_DIR / f"test{_suffix}"  # noqa: F405
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":  # noqa: F405
    if not env_str("DATABASE_URL"):
        # Not even opened by the tests (they use TEST's), but nothing here should name the dev file.
        DATABASES["default"]["NAME"] = TEST_VAR_DIR / "switchyard.sqlite3"  # noqa: F405
    TEST_VAR_DIR.mkdir(parents=True, exist_ok=True)
    # Threads in concurrency tests need their own connections to one database: a file, not :memory:.
    DATABASES["default"]["TEST"] = {"NAME": str(TEST_VAR_DIR / "test.sqlite3")}  # noqa: F405
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
# takes another suite's (or the dev server's) messages.
if not REDIS_URL:  # noqa: F405
    _broker = TEST_VAR_DIR / "broker"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker / "queue"),
        # Fanout (worker control) messages; kombu would otherwise write ./control/ in the cwd.
        "control_folder": str(_broker / "control"),
        "data_folder_out": str(_broker / "queue"),
        "processed_folder": str(_broker / "processed"),
        "store_processed": False,
    }
    CELERY_RESULT_BACKEND = f"file://{_broker / 'results'}"
else:
    # On a Redis shared with a dev server the suite's tasks go to a queue of its own, which only
    # the suite's workers consume.
    CELERY_TASK_DEFAULT_QUEUE = f"switchyard-test{_suffix}"

# File roots (each test also gets fresh ones in tests/conftest.py; these are what a process
# started without them would use). A variable set in the environment still wins, as in base.
WORKSPACE_ROOT = env_path("WORKSPACE_ROOT", TEST_VAR_DIR / "workspaces")
SAVED_REPORTS_ROOT = env_path("SAVED_REPORTS_ROOT", TEST_VAR_DIR / "saved_reports")
STATE_DIR = env_path("STATE_DIR", TEST_VAR_DIR / "compound-state")
LOGS_ROOT = env_path("LOGS_ROOT", TEST_VAR_DIR / "logs")
REPORTS_DIR = env_path("REPORTS_DIR", TEST_VAR_DIR / "reports")
TASK_DEFS_DIR = env_path("TASK_DEFS_DIR", TEST_VAR_DIR / "tasks")
ARCHIVE_ROOT = env_path("ARCHIVE_ROOT", TEST_VAR_DIR / "archives")
EXPORT_ROOTS = env_paths("EXPORT_ROOTS", [TEST_VAR_DIR / "exports"])
STATIC_ROOT = TEST_VAR_DIR / "static"
STORAGES["archives"] = {**STORAGES["archives"], "OPTIONS": {"location": str(ARCHIVE_ROOT)}}  # noqa: F405
# Serve static files from the apps' folders, no collectstatic needed.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True
