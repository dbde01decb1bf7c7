"""An ASGI app imported on its first request instead of when the process starts.

For a part of the site few processes serve and whose imports are dear: ``/mcp`` (the MCP SDK and its
server, about 0.45 s of CPU, a quarter of a web process's start). The first request waits for the
import, made in a thread so the event loop serves other requests meanwhile; the rest go straight
to the app.
"""

import asyncio

from django.utils.module_loading import import_string


class LazyASGIApp:
    def __init__(self, name: str) -> None:
        self.name = name  # dotted path of the ASGI app, as settings name middleware
        self._app = None
        self._lock = asyncio.Lock()  # bound to the server's event loop on first use

    async def __call__(self, scope, receive, send) -> None:
        if self._app is None:
            async with self._lock:
                if self._app is None:  # requests that queued on the lock find it loaded
                    self._app = await asyncio.to_thread(import_string, self.name)
        await self._app(scope, receive, send)
