"""The websocket origin check compares scheme, host and port with the request's own origin."""

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.test import Client

from config.asgi import application
from config.ws_origin import origin_allowed
from tests.board.board_helpers import product_owner
from tests.worker import WS_TIMEOUT

pytestmark = pytest.mark.django_db(transaction=True)


def _cookie_for(user) -> tuple[bytes, bytes]:
    client = Client()
    client.force_login(user)
    return (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())


def _connects(origin: bytes, host: bytes) -> bool:
    cookie = _cookie_for(product_owner())

    async def scenario():
        communicator = WebsocketCommunicator(
            application, "/ws/board/", headers=[(b"host", host), (b"origin", origin), cookie]
        )
        connected, _ = await communicator.connect(timeout=WS_TIMEOUT)
        if connected:
            await communicator.disconnect()
        return connected

    return async_to_sync(scenario)()


def test_a_page_on_another_port_of_the_same_host_is_refused():
    # given a logged-in person whose browser runs a page from localhost:9999
    # when that page opens the board's websocket of the server on localhost:8000
    # then the handshake is refused, however good the cookie
    assert _connects(b"http://localhost:9999", b"localhost:8000") is False


def test_the_sites_own_page_connects():
    assert _connects(b"http://localhost:8000", b"localhost:8000") is True


@pytest.mark.parametrize(
    ("origin", "host", "secure", "allowed"),
    [
        ("http://localhost:8000", "localhost:8000", False, True),
        ("http://localhost", "localhost", False, True),  # port 80 on both sides
        ("http://localhost:80", "localhost", False, True),
        ("http://localhost:9999", "localhost:8000", False, False),  # another port
        ("http://localhost", "localhost:8000", False, False),
        ("https://localhost:8000", "localhost:8000", False, False),  # another scheme
        ("http://localhost:443", "localhost", True, False),
        ("https://localhost", "localhost", True, True),
        ("http://127.0.0.1:8000", "localhost:8000", False, False),  # another host
        ("http://[::1]:8000", "[::1]:8000", False, True),
        ("http://evil.example:8000", "evil.example:8000", False, False),  # not an allowed host
        ("null", "localhost:8000", False, False),
        ("http://localhost:notaport", "localhost:8000", False, False),
    ],
)
def test_origin_rules(origin, host, secure, allowed):
    assert origin_allowed(origin=origin, host_header=host, secure=secure) is allowed


def test_a_trusted_origin_is_accepted_exactly(settings):
    settings.CSRF_TRUSTED_ORIGINS = ["https://switchyard.example.com"]

    assert origin_allowed(origin="https://switchyard.example.com", host_header="internal:8000", secure=False)
    assert not origin_allowed(origin="https://switchyard.example.com:8443", host_header="internal:8000", secure=False)


@pytest.mark.parametrize("path", ["/ws/nowhere/", "/ws/sessions/", "/ws/sessions/a b/", "/", "/ws/board/extra/"])
def test_a_websocket_to_an_unknown_path_is_refused_not_an_error(path):
    # given the site's own page with a good cookie, when it opens a websocket nothing serves
    # then the handshake is refused (Channels' router would raise: a 500 from the server)
    cookie = _cookie_for(product_owner())

    async def scenario():
        communicator = WebsocketCommunicator(
            application, path, headers=[(b"host", b"localhost:8000"), (b"origin", b"http://localhost:8000"), cookie]
        )
        connected, _ = await communicator.connect(timeout=WS_TIMEOUT)
        return connected

    assert async_to_sync(scenario)() is False
