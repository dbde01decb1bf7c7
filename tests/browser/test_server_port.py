"""The browser tests' server (tests/browser/server.py) starts on another port when the one it was
given is taken before it binds it (CI saw a runner's telemetry relay take it, in a test beside)."""

import socket

import httpx
import pytest

from tests.browser.server import ServerProcess

pytestmark = pytest.mark.usefixtures("transactional_db")


def test_a_port_taken_before_the_server_binds_it_moves_the_server_to_another(tmp_path):
    server = ServerProcess(tmp_path / "server.log")
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", server.port))  # taken between free_port() and the server's bind
        squatter.listen(1)
        taken = server.port
        try:
            server.start()
            assert server.port != taken
            assert httpx.get(f"{server.url}/accounts/login/", timeout=10).status_code == 200
            assert "address already in use" in server.output()  # the first try did meet the squatter
        finally:
            server.stop()
