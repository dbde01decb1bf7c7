"""The production web command of the Procfile refuses oversized heads and drops idle connections.

Run for real: gunicorn with its worker class, exactly as the Procfile's ``web:`` line says, on a free
port, with short timeouts set through the environment; clients are raw sockets, because an HTTP
client library would refuse to send what these tests send.
"""

import contextlib
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.browser.server import free_port
from tests.config.login_page import login, login_status
from tests.factories import UserFactory
from tests.worker import ROOT, stop_process, wait_for, worker_environment

pytestmark = pytest.mark.worker
SHORT = {
    "LOGIN_FAILURE_LIMIT": "2",
    "HTTP_BODY_IDLE_TIMEOUT_SECONDS": "1",
    "HTTP_KEEPALIVE_SECONDS": "1",
    "HTTP_HEAD_TIMEOUT_SECONDS": "2",
}


def procfile_web_command() -> str:
    line = next(line for line in (ROOT / "Procfile").read_text().splitlines() if line.startswith("web:"))
    return line.removeprefix("web:").strip()


@pytest.fixture(scope="module")
def web(django_db_setup, django_db_blocker, tmp_path_factory):
    """The Procfile's web process (one worker) on a free port, against the test database."""
    port = free_port()
    log_path = tmp_path_factory.mktemp("gunicorn") / "web.log"
    with django_db_blocker.unblock():
        env = worker_environment({**SHORT, "PORT": str(port), "WEB_CONCURRENCY": "1"})
    env.pop("FORWARDED_ALLOW_IPS", None)  # the default: gunicorn's own would believe 127.0.0.1
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    log = open(log_path, "wb")  # noqa: SIM115 - closed by stop_process
    process = subprocess.Popen(
        ["sh", "-c", f"exec {procfile_web_command()}"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        wait_for(lambda: _answers(port), timeout=120, message=f"gunicorn to answer:\n{log_path.read_text()}")
        yield port
    finally:
        stop_process(process, log)


def _answers(port: int) -> bool:
    if not _connectable(port):
        return False
    # Not answered within the read's limit is "not yet": a worker still booting on a loaded machine (CI
    # saw a 15 s first answer); wait_for's own deadline decides when that is a failure.
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            return read_until_closed(sock, limit=5).startswith(b"HTTP/1.1 ")
    except TimeoutError:
        return False


def _connectable(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def read_until_closed(sock: socket.socket, limit: float = 15) -> bytes:
    """Everything the server sends until it closes the connection (a socket timeout fails the test)."""
    sock.settimeout(limit)
    chunks = []
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def send_all_until_refused(sock: socket.socket, data: bytes) -> None:
    # The server may answer and close before reading all of it: what we want.
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        sock.sendall(data)


def status_of(answer: bytes) -> int:
    match = re.match(rb"HTTP/1\.1 (\d{3}) ", answer)
    assert match, answer[:200]
    return int(match.group(1))


def test_two_megabytes_of_headers_are_refused_and_the_connection_closed(web):
    with socket.create_connection(("127.0.0.1", web)) as sock:
        send_all_until_refused(
            sock, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * 2_000_000 + b"\r\n\r\n"
        )
        answer = read_until_closed(sock)
    assert status_of(answer) == 431


def test_twenty_thousand_headers_are_refused_and_the_connection_closed(web):
    head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"".join(b"X-%d: 1\r\n" % n for n in range(20_000))
    with socket.create_connection(("127.0.0.1", web)) as sock:
        send_all_until_refused(sock, head + b"\r\n")
        answer = read_until_closed(sock)
    assert status_of(answer) == 431


def test_a_body_that_stops_half_way_is_dropped_after_the_idle_timeout(web):
    with socket.create_connection(("127.0.0.1", web)) as sock:
        sock.sendall(
            b"POST /api/v1/events/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000\r\n\r\n" + b'{"name": "x"'
        )
        # then the server closes the connection without an answer once the body has been idle for 1 s
        assert read_until_closed(sock) == b""


def test_a_request_head_that_never_ends_is_answered_408_and_closed(web):
    with socket.create_connection(("127.0.0.1", web)) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        answer = read_until_closed(sock)
    assert status_of(answer) == 408


def test_an_idle_keep_alive_connection_is_closed(web):
    with socket.create_connection(("127.0.0.1", web)) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        answer = read_until_closed(sock)
    # one answer, then the server closed the connection it was keeping alive
    assert answer.count(b"HTTP/1.1 ") == 1
    assert status_of(answer) in (200, 503)


def test_a_request_within_the_limits_is_served(web):
    headers = b"".join(b"X-%d: %s\r\n" % (n, b"v" * 100) for n in range(50))
    with socket.create_connection(("127.0.0.1", web)) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" + headers + b"\r\n")
        answer = read_until_closed(sock)
    assert status_of(answer) in (200, 503)


def test_one_header_of_127890_bytes_sent_at_once_is_refused(web):
    with socket.create_connection(("127.0.0.1", web)) as sock:
        send_all_until_refused(
            sock, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * 127_870 + b"\r\n\r\n"
        )
        answer = read_until_closed(sock)
    assert status_of(answer) == 431


@pytest.mark.django_db(transaction=True)
def test_x_forwarded_for_from_the_loopback_does_not_unlock_a_login(web):
    person = UserFactory(username="gunicorn-locked", password="right-pw-for-tests")
    for _ in range(2):
        login(f"http://127.0.0.1:{web}", person.username, "wrong")

    claimed = login(f"http://127.0.0.1:{web}", person.username, "right-pw-for-tests", forwarded_for="10.1.1.2")

    assert login_status(claimed) == "locked"
