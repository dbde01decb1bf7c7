"""The hook's HTTP over CPython's _socket: the parts it writes itself against the standard library's,
a real HTTP server on both address families, and the imports the hook's process is spared."""

import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.parse

import pytest

from switchyard_client.hook import wire

QUOTED = ["plain", "a b/c?d=e&f#g", "caf\u00e9 \U0001f600", "~user_1.2-3", "%41", "", "sess:agent-1/x", "\x00\x7f"]


@pytest.mark.parametrize("value", QUOTED)
@pytest.mark.parametrize("safe", ["", "/", ":/"])
def test_quote_writes_what_urllib_quote_writes(value, safe):
    assert wire.quote(value, safe=safe) == urllib.parse.quote(value, safe=safe)


@pytest.mark.parametrize(
    "netloc,expected",
    [
        ("example.org", ("example.org", 80)),
        ("example.org:8000", ("example.org", 8000)),
        ("127.0.0.1:9", ("127.0.0.1", 9)),
        ("[::1]", ("::1", 80)),
        ("[::1]:8080", ("::1", 8080)),
    ],
)
def test_split_host_reads_what_urlsplit_reads(netloc, expected):
    parts = urllib.parse.urlsplit(f"http://{netloc}/")
    assert wire.split_host(netloc) == expected == (parts.hostname, parts.port or 80)


class _Handler(http.server.BaseHTTPRequestHandler):
    seen: list = []

    def log_message(self, *args):  # a quiet test run
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.seen.append((self.command, self.path, self.headers["Authorization"], self.headers["Host"], body))
        answer = json.dumps({"echo": json.loads(body), "path": self.path}).encode()
        if self.path.startswith("/chunked"):
            self.protocol_version = "HTTP/1.1"
            self.send_response(201)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for piece in (answer[:5], answer[5:]):
                self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
        else:
            self.send_response(200)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)


def _serve(family: int, host: str):
    server_class = type("Server", (http.server.ThreadingHTTPServer,), {"address_family": family})
    server = server_class((host, 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.mark.parametrize(
    "family,host,url_host", [(socket.AF_INET, "127.0.0.1", "localhost"), (socket.AF_INET6, "::1", "[::1]")]
)
@pytest.mark.parametrize("path", ["/api/v1/x/?a=b%20c", "/chunked/y"])
def test_a_request_reaches_a_real_server_and_its_answer_is_read(family, host, url_host, path):
    if family == socket.AF_INET6 and not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    try:
        server = _serve(family, host)
    except OSError as exc:
        pytest.skip(f"cannot listen on {host}: {exc}")
    port = server.server_address[1]
    _Handler.seen = []
    try:
        status, body = wire.request(
            "POST",
            f"http://{url_host}:{port}{path}",
            headers={"Authorization": "Bearer k1"},
            body=json.dumps({"n": "caf\u00e9"}).encode(),
            deadline=time.monotonic() + 5,
        )
    finally:
        server.shutdown()
        server.server_close()
    assert status == (201 if path.startswith("/chunked") else 200)
    assert body == {"echo": {"n": "caf\u00e9"}, "path": path}
    assert _Handler.seen == [("POST", path, "Bearer k1", f"{url_host}:{port}", json.dumps({"n": "caf\u00e9"}).encode())]


def test_a_refused_connection_and_an_unknown_host_are_wire_errors():
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(wire.WireError, match="ConnectionRefused"):
        wire.request("GET", f"http://127.0.0.1:{port}/", headers={}, deadline=time.monotonic() + 2)
    with pytest.raises(wire.WireError):
        wire.request("GET", "http://no-such-host.invalid/", headers={}, deadline=time.monotonic() + 2)


def test_a_server_that_never_answers_times_out_at_the_deadline():
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        started = time.monotonic()
        with pytest.raises(wire.WireError, match="timed out"):
            wire.request("GET", f"http://127.0.0.1:{silent.getsockname()[1]}/", headers={}, deadline=started + 0.3)
        assert time.monotonic() - started < 2


def test_the_hook_process_imports_neither_json_nor_socket_nor_urllib_nor_re(tmp_path):
    # The hook's budget is tens of milliseconds; these four (with enum, selectors, ipaddress) were
    # about 25 ms of it. A new import that brings one back fails here, not in a benchmark later.
    script = (
        "import sys, io\n"
        "sys.stdin = io.StringIO(sys.argv[1])\n"
        "from switchyard_client.cli import main\n"
        "main(['hook'])\n"
        "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in {'json', 'socket', 'urllib', 're', 'enum', 'selectors', 'ipaddress', 'httpx'})))\n"
    )
    payload = json.dumps(
        {"hook_event_name": "PostToolUse", "session_id": "s-1", "tool_name": "Bash", "tool_use_id": "t1"}
    )
    env = {
        **os.environ,
        "SWITCHYARD_URL": "http://127.0.0.1:9",
        "SWITCHYARD_KEY": "k",
        "SWITCHYARD_STATE_DIR": str(tmp_path),
    }
    done = subprocess.run([sys.executable, "-c", script, payload], env=env, capture_output=True, text=True, timeout=30)
    assert "unreachable" in done.stderr  # it did try to send (and spooled)
    assert done.stdout.strip() == ""
