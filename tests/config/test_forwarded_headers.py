"""The web server believes no X-Forwarded-For unless FORWARDED_ALLOW_IPS names the proxy, and holds one
oversized header to the 64 KiB head limit: both through the real server `make run` starts.

Before: uvicorn believed X-Forwarded-For from 127.0.0.1, where local agents connect from, so a locked
username logged in with the right password under another claimed address, and a header naming a new
address on each try never locked; and one 127,890-byte header, sent at once, was served.
"""

import socket

import pytest

from tests.browser.server import module_server
from tests.config.login_page import login, login_status
from tests.config.test_http_limits import read_until_closed, send_all_until_refused, status_of
from tests.factories import UserFactory

LIMIT = 3
PASSWORD = "right-pw-for-tests"
# A None value keeps the variable out of the server's environment: the default is what is tested.
SERVER_ENV = {"LOGIN_FAILURE_LIMIT": str(LIMIT), "FORWARDED_ALLOW_IPS": None}


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker, tmp_path_factory):
    process = module_server(django_db_blocker, tmp_path_factory, "plain", env=SERVER_ENV)
    yield process
    process.stop()


@pytest.fixture(scope="module")
def behind_proxy(django_db_setup, django_db_blocker, tmp_path_factory):
    """A server told that 127.0.0.1 is its proxy, as a deployment behind nginx on the same host sets it."""
    env = {**SERVER_ENV, "FORWARDED_ALLOW_IPS": "127.0.0.1"}
    process = module_server(django_db_blocker, tmp_path_factory, "proxied", env=env)
    yield process
    process.stop()


@pytest.mark.django_db(transaction=True)
def test_a_locked_username_stays_locked_whatever_x_forwarded_for_claims(server):
    # given a username locked at the loopback address (the third wrong password already answers locked)
    person = UserFactory(username="xff-locked", password=PASSWORD)
    tries = [login_status(login(server.url, person.username, "wrong")) for _ in range(LIMIT)]
    assert tries == ["refused 200"] * (LIMIT - 1) + ["locked"]

    # then the right password under another claimed address is refused as well
    assert login_status(login(server.url, person.username, PASSWORD, forwarded_for="10.1.1.2")) == "locked"
    assert login_status(login(server.url, person.username, PASSWORD)) == "locked"


@pytest.mark.django_db(transaction=True)
def test_an_address_claimed_afresh_on_each_try_still_locks(server):
    person = UserFactory(username="xff-rotating", password=PASSWORD)
    for n in range(LIMIT):
        login(server.url, person.username, "wrong", forwarded_for=f"10.2.0.{n + 1}")

    assert login_status(login(server.url, person.username, PASSWORD, forwarded_for="10.2.0.99")) == "locked"


@pytest.mark.django_db(transaction=True)
def test_a_proxy_named_in_forwarded_allow_ips_is_believed(behind_proxy):
    # given a username locked at the address the proxy says the person has
    person = UserFactory(username="xff-proxied", password=PASSWORD)
    for _ in range(LIMIT):
        login(behind_proxy.url, person.username, "wrong", forwarded_for="10.3.0.1")

    # then it is locked there, and not for the same person coming through the proxy from elsewhere
    assert login_status(login(behind_proxy.url, person.username, PASSWORD, forwarded_for="10.3.0.1")) == "locked"
    assert login_status(login(behind_proxy.url, person.username, PASSWORD, forwarded_for="10.3.0.2")) == "logged in"


def _send(port: int, head: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        send_all_until_refused(sock, head)
        return read_until_closed(sock)


def _head(header_bytes: int = 0, path: str = "/healthz") -> bytes:
    """A GET whose one X-Big header line is ``header_bytes`` long (name, value and CRLF)."""
    head = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n".encode()
    if header_bytes:
        head += b"X-Big: " + b"a" * (header_bytes - len(b"X-Big: \r\n")) + b"\r\n"
    return head + b"\r\n"


def test_one_header_of_127890_bytes_sent_at_once_is_answered_431(server):
    assert status_of(_send(server.port, _head(127_890))) == 431


def test_a_request_line_of_100_kb_is_answered_431(server):
    assert status_of(_send(server.port, _head(path="/healthz?q=" + "a" * 100_000))) == 431


def test_a_head_just_under_64_kib_is_served(server):
    assert status_of(_send(server.port, _head(64 * 1024 - 200))) in (200, 503)
