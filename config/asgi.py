"""ASGI entry point: HTTP through Django, websockets through Channels' router.

HTTP goes through config/speed/asgi_handler.py (Django's handler with the middleware chain and the
view in one thread hop, on reused request threads); each speed trick there names what it mirrors.
"""

import os

import django

from config.speed.asgi_handler import SyncChainASGIHandler

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")

# Django must be set up before anything imports models.
django.setup(set_prefix=False)
django_asgi_app = SyncChainASGIHandler()

# gunicorn runs no system checks: production's refusal of demo passwords is made here too.
from config.demo_passwords import refuse_demo_passwords_at_startup  # noqa: E402

refuse_demo_passwords_at_startup()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402
from django.utils.module_loading import import_string  # noqa: E402

# What a web process starts with (settings.WEB_STARTUP, by name as MIDDLEWARE is): e.g. the sweep of
# upload temporaries cut short when the last web process died (workspaces/files/upload_parts.py).
for name in settings.WEB_STARTUP:
    import_string(name)()

from config.lazy_app import LazyASGIApp  # noqa: E402
from config.ws_origin import SameOriginValidator  # noqa: E402

# /mcp is MCP's Streamable HTTP transport (sessions_app/mcp_http.py), not a Django view: the SDK's
# transport streams its answers from its own task group. Named, as config/urls.py names views, and
# imported on the first /mcp request (config/lazy_app.py): the SDK is a quarter of a web process's start.
mcp_http_app = LazyASGIApp("sessions_app.mcp_http.application")


async def http_app(scope, receive, send):
    if scope["path"] == "/mcp" or scope["path"].startswith("/mcp/"):
        return await mcp_http_app(scope, receive, send)
    return await django_asgi_app(scope, receive, send)


application = ProtocolTypeRouter(
    {
        "http": http_app,
        # Scheme, host and port of the Origin must be the site's own (config/ws_origin.py).
        "websocket": SameOriginValidator(AuthMiddlewareStack(URLRouter(import_string(settings.WEBSOCKET_URLCONF)))),
    }
)


# Start-up's objects out of the collector's full collections (config/speed/gc_freeze.py).
from config.speed.gc_freeze import freeze_startup_objects  # noqa: E402

freeze_startup_objects()
