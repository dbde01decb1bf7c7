"""ASGI entry point: HTTP through Django, websockets through Channels' router."""

import os

import django
from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIHandler

from config.asgi_stream import AfterBodyReceive, StreamedBody, is_streamed

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")


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

    def load_middleware(self, is_async=False):
        super().load_middleware(is_async=False)

    async def handle(self, scope, receive, send):
        # File uploads are streamed to the view instead of spooled first (config/asgi_stream.py).
        if is_streamed(scope):
            receive = AfterBodyReceive(receive, StreamedBody(receive))
        return await super().handle(scope, receive, send)

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

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from config.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
