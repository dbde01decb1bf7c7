"""Request bodies streamed from the ASGI server to the view, for file uploads and run logs.

Django's ASGI handler reads the whole body into a spooled temporary file before the view
runs, so a 100 MB upload was written to disk twice: once by Django, once into the workspace.
For the routes matched by ``is_streamed``, the handler instead gives the request a file-like
object fed from the ASGI ``receive`` channel while the view reads it.

A pump task on the event loop keeps pulling body messages into a bounded buffer, so the
network read overlaps the view's disk writes and hashing (the ASGI server stops reading the
socket as soon as about 64 KB wait unread, so reading only when the view asks would stall
the transfer at every block). The view runs in a worker thread; each ``read()`` hops to the
event loop once for about a megabyte.

Django also listens for a client disconnect while the view runs, by calling ``receive``; for
a streamed request that listener waits until the body has been read to the end, so the two
never take each other's messages.
"""

import asyncio
import re
from collections import deque

from asgiref.sync import async_to_sync

# PUT /api/v1/sessions/{id}/files/{path}: the workspace file upload.
STREAMED = re.compile(r"^/api/v1/sessions/[^/]+/files/.+")
# POST /api/v1/runs/{id}/log/: a run's output, shipped by its runner up to 64 MiB a request.
STREAMED_POST = re.compile(r"^/api/v1/runs/[0-9]+/log/$")
READ_BLOCK = 1024 * 1024
BUFFER_LIMIT = 8 * 1024 * 1024  # the pump waits while this much is read but not yet taken


def is_streamed(scope) -> bool:
    if scope.get("type") != "http":
        return False
    pattern = {"PUT": STREAMED, "POST": STREAMED_POST}.get(scope.get("method"))
    return pattern is not None and bool(pattern.match(scope["path"]))


class StreamedBody:
    """A read-only body file fed by ``receive``; ``read()`` is called from the view's thread."""

    def __init__(self, receive):
        self._receive = receive
        # The body messages as they came: taking a block pops whole chunks, with no copying of
        # what stays behind.
        self._chunks: deque[bytes] = deque()
        self._buffered = 0
        self._changed = asyncio.Condition()
        self._pump: asyncio.Task | None = None
        self._aborted = False
        self.finished = asyncio.Event()  # the last body message arrived (or the client left)

    async def _pump_body(self) -> None:
        while not self.finished.is_set():
            async with self._changed:
                await self._changed.wait_for(lambda: self._buffered < BUFFER_LIMIT)
            message = await self._receive()
            async with self._changed:
                if message["type"] == "http.disconnect":
                    self._aborted = True
                    self.finished.set()
                else:
                    if body := message.get("body", b""):
                        self._chunks.append(body)
                        self._buffered += len(body)
                    if not message.get("more_body", False):
                        self.finished.set()
                self._changed.notify_all()

    async def _take(self, size: int) -> bytes:
        if self._pump is None:
            self._pump = asyncio.ensure_future(self._pump_body())
        async with self._changed:
            await self._changed.wait_for(lambda: self._buffered >= size or self.finished.is_set())
            if self._aborted:
                # Imported here: config.asgi loads this module before Django is set up.
                from config.api.errors import DomainError

                raise DomainError("The client went away before the whole body arrived; nothing was stored.")
            parts, taken = [], 0
            while self._chunks and taken < size:
                chunk = self._chunks.popleft()
                if taken + len(chunk) > size:
                    keep = size - taken
                    self._chunks.appendleft(chunk[keep:])
                    chunk = chunk[:keep]
                parts.append(chunk)
                taken += len(chunk)
            self._buffered -= taken
            self._changed.notify_all()
            return parts[0] if len(parts) == 1 else b"".join(parts)

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            parts = []
            while chunk := async_to_sync(self._take)(READ_BLOCK):
                parts.append(chunk)
            return b"".join(parts)
        return async_to_sync(self._take)(size)

    def readline(self, size: int = -1) -> bytes:
        raise OSError("A streamed upload body is read in blocks, not lines.")

    def close(self) -> None:
        if self._pump is not None and not self._pump.done():
            self._pump.cancel()
        self._chunks.clear()


class AfterBodyReceive:
    """``receive`` for Django's disconnect listener: only once the body has been read out."""

    def __init__(self, receive, body: StreamedBody):
        self._receive = receive
        self.body = body

    async def __call__(self):
        await self.body.finished.wait()
        return await self._receive()
