"""Django's ASGI handler, with the middleware chain and the view run in one thread hop.

Mirrors, in django/core/handlers/asgi.py of Django 5.2.19: ``ASGIHandler.__call__``,
``ASGIHandler.handle`` and ``ASGIHandler.run_get_response``; and in django/core/handlers/base.py:
``BaseHandler.load_middleware`` (built here in sync mode) and ``BaseHandler.get_response_async``
(replaced by its sync twin ``BaseHandler.get_response``: URLconf, chain, closers, 4xx/5xx log).

Every view of the HTTP API is sync, and WhiteNoise is a sync-only middleware. Django's handler
builds the chain in async mode, so a request went from the event loop to a thread for the
middleware, back to the loop for the view dispatch, and to the thread again for the view; and
``handle`` sends request_started, runs the view and closes the response in three more crossings.
Here the chain is built in sync mode (as under WSGI) and request_started, the chain, the view and
closing a response that is not streamed run in one ``sync_to_async`` call on the request's thread;
then the request's reference cycles are broken (config/speed/request_cycles.py).
An async view would still work: Django calls it through ``async_to_sync``.

What this leaves out of Django's ``handle`` is its disconnect listener, which cancels the awaiting
of a view when the client goes away: for sync views it never stopped the view itself, and a send
to a client gone is dropped by the server. File uploads and run logs (``is_streamed``) go through
Django's own ``handle``, with the body streamed to the view (config/asgi_stream.py).
"""

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.urls import set_script_prefix

from config.asgi_stream import AfterBodyReceive, StreamedBody, is_streamed
from config.speed.request_cycles import break_request_cycles
from config.speed.request_threads import RequestThreads


class SyncChainASGIHandler(ASGIHandler):
    threads = RequestThreads()

    def load_middleware(self, is_async=False):
        super().load_middleware(is_async=False)

    async def __call__(self, scope, receive, send):
        # ASGIHandler.__call__, with a borrowed executor instead of a new thread per request.
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        executor = self.threads.take()
        try:
            async with ThreadSensitiveContext(executor=executor):
                await self.handle(scope, receive, send)
        finally:
            self.threads.give_back(executor)

    async def handle(self, scope, receive, send):
        if is_streamed(scope):
            receive = AfterBodyReceive(receive, StreamedBody(receive))
            return await super().handle(scope, receive, send)
        return await self._handle_in_one_hop(scope, receive, send)

    async def _handle_in_one_hop(self, scope, receive, send):
        """ASGIHandler.handle with one thread hop where it makes three: a response that is not
        streamed is complete once the view returns, so it is closed (request_finished: the
        database connection goes back) before it is sent. A streamed one is closed after it is
        sent, as Django does."""
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
        # Django's handle (streamed requests) runs the sync chain in one hop: get_response is the twin.
        return await sync_to_async(self.get_response, thread_sensitive=True)(request)
