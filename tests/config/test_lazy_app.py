"""config/lazy_app.py: an ASGI app imported on its first request, once, however many arrive together
(that a web process starts without the MCP SDK is in test_startup_imports.py)."""

import asyncio
import threading

from config import lazy_app
from config.lazy_app import LazyASGIApp


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
