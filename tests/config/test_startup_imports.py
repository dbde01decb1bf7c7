"""What a Django process imports when it starts: one that serves no API (a Celery worker, a command),
and a web process. The tests start about 170 such processes a suite, and production starts one per
worker, command and web process."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json, sys
import django
django.setup()
print(json.dumps({name: name in sys.modules for name in sys.argv[1:]}))
"""
# A web process: the ASGI application, as uvicorn and gunicorn load it.
WEB_PROBE = """
import json, sys
import config.asgi
print(json.dumps({name: name in sys.modules for name in sys.argv[1:]}))
"""


def _loaded(probe: str, wanted: list[str]) -> dict[str, bool]:
    """Which of ``wanted`` a fresh process on SQLite has imported once ``probe`` has run."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL",)}
    env["DJANGO_SETTINGS_MODULE"] = "config.settings.test"
    result = subprocess.run(
        [sys.executable, "-c", probe, *wanted], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_setting_django_up_on_sqlite_imports_neither_the_schema_extensions_nor_psycopg():
    # given a process on SQLite (the embedded default) that sets Django up and loads no API view
    loaded = _loaded(
        PROBE,
        ["drf_spectacular.extensions", "psycopg", "httpx", "cryptography", "board.models", "config.speed.prepared"],
    )
    # then the apps are loaded (the models, the claim's module) but not the OpenAPI extensions
    # (registered by the API's modules, 140 ms), psycopg (only PostgreSQL's claim needs it), httpx (a
    # webhook's or GitHub's call imports it; with its command line's rich and pygments, where installed,
    # 120 ms) nor cryptography (a GitHub token's encryption imports it)
    assert loaded == {
        "drf_spectacular.extensions": False,
        "psycopg": False,
        "httpx": False,
        "cryptography": False,
        "board.models": True,
        "config.speed.prepared": True,
    }


def test_a_web_process_starts_without_the_mcp_sdk_httpx_or_werkzeug():
    # /mcp imports the SDK on its first request (config/lazy_app.py); a ranged download werkzeug's
    # header parser (importing werkzeug loads its development server and test client too)
    assert _loaded(WEB_PROBE, ["mcp", "sessions_app.mcp_http", "httpx", "werkzeug"]) == {
        "mcp": False,
        "sessions_app.mcp_http": False,
        "httpx": False,
        "werkzeug": False,
    }
