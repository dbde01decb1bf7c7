"""ASGI entry point: HTTP through Django, websockets through Channels' router."""

import gc
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import django
from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.urls import set_script_prefix

from config.asgi_stream import AfterBodyReceive, StreamedBody, is_streamed

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")


class RequestThreads:
    """Single-thread executors handed from one request to the next.

    Django runs each HTTP request in a ``ThreadSensitiveContext``: by default asgiref makes a new
    one-thread executor for it, so every request started a thread, built Django's per-thread
    state (its database connection wrapper among it), and at the end started a second thread to
    join the first. Here a request borrows an idle executor and gives it back, as threads are
    reused under WSGI. One executor still runs one request at a time (a view that outlives its
    request, after a client disconnect, delays the next borrower, never runs beside it), and
    Django's request_started/request_finished handlers still run on the request's thread.
    """

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


def break_request_cycles(request, response) -> None:
    """Unlink the objects of a finished request, so that reference counting frees them at once.

    A request's objects point at each other: DRF's view holds its response, whose renderer
    context holds the view and DRF's request, whose parser context holds the request itself;
    Django's request is held by the messages storage and django-htmx's details it carries, and
    its resolver match keeps the list of URL patterns tried. Left as they are, each request
    leaves about a hundred objects that only the cyclic garbage collector frees; at a few
    hundred requests a second its collections ran to 15-80 ms each, with the GIL held, and
    stalled every request in flight in the worker: the p99 of the API (bench/README.md). Called
    once the response is complete (closed, and for a streamed one also sent), when nothing reads
    these objects any more. A streamed response (a file download) leads to no DRF view, so that
    view's own cycle is still left to the collector: one per download, off the hot paths.
    """
    context = getattr(response, "renderer_context", None)
    if context:
        for part in (context.get("view"), context.get("request")):
            if part is not None:
                part.__dict__.clear()
        response.renderer_context = None
    if request is not None:
        request.__dict__.clear()


class SyncChainASGIHandler(ASGIHandler):
    """Django's ASGI handler, with the middleware chain and the view run in one thread hop.

    Every view of the HTTP API is sync, and WhiteNoise is a sync-only middleware. Django's
    handler builds the chain in async mode, so a request went from the event loop to a
    thread for the middleware, back to the loop for the view dispatch, and to the thread
    again for the view. Here the chain is built in sync mode (as under WSGI) and run whole
    by one ``sync_to_async`` call: the same middleware, in the same order, on the same
    per-request thread, with one crossing less each way. An async view would still work:
    Django calls it through ``async_to_sync``.
    """

    threads = RequestThreads()

    def load_middleware(self, is_async=False):
        super().load_middleware(is_async=False)

    async def __call__(self, scope, receive, send):
        # Django's own __call__, with a borrowed executor instead of a new thread per request.
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        executor = self.threads.take()
        try:
            async with ThreadSensitiveContext(executor=executor):
                await self.handle(scope, receive, send)
        finally:
            self.threads.give_back(executor)

    async def handle(self, scope, receive, send):
        # File uploads are streamed to the view instead of spooled first (config/asgi_stream.py).
        if is_streamed(scope):
            receive = AfterBodyReceive(receive, StreamedBody(receive))
            return await super().handle(scope, receive, send)
        return await self._handle_in_one_hop(scope, receive, send)

    async def _handle_in_one_hop(self, scope, receive, send):
        """Django's ``handle`` with one thread hop where it makes three.

        Django sends request_started, runs the view and closes the response (request_finished:
        the database connection goes back to the pool) in three ``sync_to_async`` calls, each a
        trip from the event loop to the request's thread and back. Here they are one: a response
        that is not streamed is complete once the view returns, so it is closed before it is sent.
        A streamed response is closed after it is sent, as Django does. What this leaves out is
        Django's disconnect listener, which cancels the awaiting of a view when the client goes
        away: for sync views it never stopped the view itself, and a send to a client gone is
        dropped by the server.
        """
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        set_script_prefix(get_script_prefix(scope))

        def respond():
            signals.request_started.send(sender=self.__class__, scope=scope)
            request, error_response = self.create_request(scope, body_file)
            response = error_response if request is None else self.get_response(request)
            if not response.streaming:
                response.close()
                break_request_cycles(request, response)
            return request, response

        try:
            request, response = await sync_to_async(respond, thread_sensitive=True)()
            await self.send_response(response, send)
            if response.streaming:
                await sync_to_async(response.close, thread_sensitive=True)()
                break_request_cycles(request, response)
        finally:
            body_file.close()

    async def read_body(self, receive):
        if isinstance(receive, AfterBodyReceive):
            return receive.body
        return await super().read_body(receive)

    async def get_response_async(self, request):
        # BaseHandler.get_response is get_response_async's sync twin (URLconf, chain, closers, 4xx/5xx log).
        return await sync_to_async(self.get_response, thread_sensitive=True)(request)


# Django must be set up before anything imports models.
django.setup(set_prefix=False)
django_asgi_app = SyncChainASGIHandler()

# gunicorn runs no system checks: production's refusal of demo passwords is made here too.
from config.demo_passwords import refuse_demo_passwords_at_startup  # noqa: E402

refuse_demo_passwords_at_startup()

# Temporaries of uploads cut short when the last web process died (workspaces/upload_parts.py).
from workspaces.upload_parts import upload_parts_sweep_in_background  # noqa: E402

upload_parts_sweep_in_background()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from config.routing import websocket_urlpatterns  # noqa: E402
from config.ws_origin import SameOriginValidator  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        # Scheme, host and port of the Origin must be the site's own (config/ws_origin.py).
        "websocket": SameOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)


def _freeze_startup_objects() -> None:
    """Keep what start-up made (Django, the apps, the URLconf: about 140,000 objects) out of the
    garbage collector's full collections. A full collection scans every tracked object with the
    GIL held, about 60 ms here, and stalls every request in flight in this worker: the tail of the
    latency. Frozen objects are never scanned (or freed), so a full collection only looks at what
    was made since; Instagram's reason for ``gc.freeze`` in pre-fork servers."""
    import django.urls

    django.urls.get_resolver().url_patterns  # noqa: B018 - import every view module now, not on the first request
    gc.collect()
    gc.freeze()


_freeze_startup_objects()
