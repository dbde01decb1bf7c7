"""Single-thread request executors handed from one request to the next.

Mirrors ``ASGIHandler.__call__`` (django/core/handlers/asgi.py, Django 5.2.19), which enters
``ThreadSensitiveContext()`` without an executor: asgiref (asgiref/sync.py, 3.13.0,
``SyncToAsync.__call__``) then makes a one-thread executor for each request and, at the end,
starts a second thread to join it. Here a request borrows an idle executor through
``ThreadSensitiveContext(executor=...)``, asgiref's public way to supply one, and gives it back,
as threads are reused under WSGI. Serves every API figure (server CPU per request).
"""

import threading
from concurrent.futures import ThreadPoolExecutor


class RequestThreads:
    """One executor still runs one request at a time (a view that outlives its request, after a
    client disconnect, delays the next borrower, never runs beside it), and Django's
    request_started/request_finished handlers still run on the request's thread."""

    KEPT = 64  # idle executors kept; a burst beyond that makes (and then stops) more

    def __init__(self) -> None:
        self._idle: list[ThreadPoolExecutor] = []
        self._lock = threading.Lock()

    def take(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return ThreadPoolExecutor(max_workers=1, thread_name_prefix="request")

    def give_back(self, executor: ThreadPoolExecutor) -> None:
        with self._lock:
            if len(self._idle) < self.KEPT:
                self._idle.append(executor)
                return
        executor.shutdown(wait=False)
