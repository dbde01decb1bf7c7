"""The websocket origin check: the page that opens a websocket must be this server's own page.

Channels' ``AllowedHostsOriginValidator`` compares only the Origin's host with ALLOWED_HOSTS, so a
page served from another port of the same host (``http://localhost:9999``: another dev server, a
tool's web UI) could open the board's websocket with the engineer's cookie. Here, as Django's CSRF
check does for a POST, the Origin must be the origin of the request itself: the same scheme (the
connection's, or SECURE_PROXY_SSL_HEADER's where Django trusts it), the host of the Host header
(one of ALLOWED_HOSTS) and the same port; or be listed in CSRF_TRUSTED_ORIGINS, exactly.
"""

from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host

DEFAULT_PORTS = {"http": 80, "https": 443}

Origin = tuple[str, str, int]


def _parse(origin: str) -> Origin | None:
    """(scheme, host, port) of an origin, the port made explicit; None if it is not one."""
    try:
        parts = urlsplit(origin)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    return scheme, parts.hostname.lower(), port or DEFAULT_PORTS[scheme]


def _own_origin(*, host_header: str, secure: bool) -> Origin | None:
    """The origin of the request itself, if its Host is one this site serves."""
    domain, port = split_domain_port(host_header)
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return None
    scheme = "https" if secure else "http"
    try:
        number = int(port) if port else DEFAULT_PORTS[scheme]
    except ValueError:
        return None
    return scheme, domain.strip("[]"), number


def origin_allowed(*, origin: str, host_header: str, secure: bool) -> bool:
    seen = _parse(origin)
    if seen is None:
        return False
    trusted = (_parse(entry) for entry in settings.CSRF_TRUSTED_ORIGINS if "*" not in entry)
    if seen in trusted:
        return True
    return seen == _own_origin(host_header=host_header, secure=secure)


def _is_secure(scope, headers: dict[bytes, bytes]) -> bool:
    if scope.get("scheme") in ("wss", "https"):
        return True
    proxy = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if not proxy:
        return False
    name, value = proxy
    header = name.removeprefix("HTTP_").replace("_", "-").lower().encode("latin1")
    return headers.get(header, b"").decode("latin1").split(",")[0].strip() == value


class SameOriginValidator:
    """ASGI middleware for websockets: denies a connection whose Origin is not the site's own."""

    def __init__(self, application):
        self.application = application

    async def __call__(self, scope, receive, send):
        if scope["type"] != "websocket":
            raise ValueError("SameOriginValidator is for websocket connections only.")
        headers: dict[bytes, bytes] = {}
        for name, value in scope.get("headers", []):
            headers.setdefault(name.lower(), value)  # the first of a repeated header, as Django reads it
        origin, host = headers.get(b"origin"), headers.get(b"host")
        if (
            origin is not None
            and host is not None
            and origin_allowed(
                origin=origin.decode("latin1"), host_header=host.decode("latin1"), secure=_is_secure(scope, headers)
            )
        ):
            return await self.application(scope, receive, send)
        return await WebsocketDenier()(scope, receive, send)
