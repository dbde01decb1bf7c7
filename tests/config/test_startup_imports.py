"""What a Django process that serves no API imports when it starts (a Celery worker, a command): the
tests start about 170 such processes a suite, and production starts one per worker and command."""

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


def test_setting_django_up_on_sqlite_imports_neither_the_schema_extensions_nor_psycopg():
    # given a process on SQLite (the embedded default) that sets Django up and loads no API view
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL",)}
    env["DJANGO_SETTINGS_MODULE"] = "config.settings.test"
    wanted = ["drf_spectacular.extensions", "psycopg", "board.models", "config.speed.prepared"]
    result = subprocess.run(
        [sys.executable, "-c", PROBE, *wanted], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    # then the apps are loaded (the models, the claim's module) but not the OpenAPI extensions
    # (registered by the API's modules, 140 ms) nor psycopg (only PostgreSQL's claim needs it)
    assert loaded == {
        "drf_spectacular.extensions": False,
        "psycopg": False,
        "board.models": True,
        "config.speed.prepared": True,
    }
