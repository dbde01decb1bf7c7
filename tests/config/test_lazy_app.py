"""config/lazy_app.py: an ASGI app imported on its first request, once, however many arrive together;
and a web process's start does not import the MCP SDK that /mcp is served by."""

import asyncio
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from config import lazy_app
from config.lazy_app import LazyASGIApp

ROOT = Path(__file__).resolve().parents[2]


def test_concurrent_first_requests_import_the_app_once_and_are_all_served(monkeypatch):
    # given an app whose import is slow, and runs in a thread other than the event loop's
    imports, served = [], []
    loop_ran = threading.Event()

    async def app(scope, receive, send):
        served.append(scope["path"])

    def slow_import(name):
        # it ends once the event loop has run something else: an import blocking the loop never would
        imports.append((name, threading.current_thread() is threading.main_thread(), loop_ran.wait(10)))
        return app

    monkeypatch.setattr(lazy_app, "import_string", slow_import)
    lazy = LazyASGIApp("somewhere.application")

    async def requests():
        async def other_work():
            await asyncio.sleep(0)
            loop_ran.set()

        await asyncio.gather(*(lazy({"path": f"/mcp/{i}"}, None, None) for i in range(5)), other_work())
        await lazy({"path": "/mcp/later"}, None, None)

    asyncio.run(requests())
    # then one import, in a thread while the loop went on, and every request reached the app
    assert imports == [("somewhere.application", False, True)]
    assert sorted(served) == [f"/mcp/{i}" for i in range(5)] + ["/mcp/later"]


def test_a_web_process_starts_without_the_mcp_sdk():
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env["DJANGO_SETTINGS_MODULE"] = "config.settings.test"
    probe = "import json, sys, config.asgi; print(json.dumps(['mcp' in sys.modules, 'sessions_app.mcp_http' in sys.modules]))"
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == [False, False]
