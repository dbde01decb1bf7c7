"""The runner's telemetry relay: the OTLP/HTTP endpoint its agents export to, on 127.0.0.1.

An agent's exporter (Claude Code's last export, sent as it exits) must not depend on the server
answering: a server that is restarting, or slow under load, lost those exports for good. So each
agent exports here (agent_env.py points OTEL_EXPORTER_OTLP_ENDPOINT at ``endpoint``); the relay
takes ``POST /v1/logs``, ``/v1/metrics`` and ``/v1/traces`` (protobuf or JSON, gzipped or not, with
the agent's Authorization header), writes the export to the spool and fsyncs it (otlp_spool.py),
and only then answers 200 with an empty export response. The forwarder (otlp_forward.py) sends it
on. The port is kept in ``<root>/otlp-relay.port`` and taken again by a runner restarted with the
same root, so the agents it re-adopts keep reaching it.

``http.server`` in a thread (a thread per open connection) keeps the runner's memory and start-up
as they were: no web framework for three POST routes.
"""

from __future__ import annotations

import contextlib
import json
import socketserver
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from switchyard_client.api.client import Client
from switchyard_client.runner.otlp_forward import Forwarder
from switchyard_client.runner.otlp_spool import OtlpSpool

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
SIGNALS = {"/v1/logs": "logs", "/v1/metrics": "metrics", "/v1/traces": "traces"}
MAX_BODY = 16 * 1024 * 1024  # the server's API_MAX_BODY_BYTES by default: it would refuse more
SPOOL_MAX = 512 * 1024 * 1024  # past this (the server away for long), exports are refused with a 503
SETTLE_ON_STOP = 5.0  # a stopping runner waits this long for a run's last exports


class OtlpRelay:
    def __init__(
        self,
        root: Path,
        *,
        api: Client,
        key_for_run: Callable[[int], str | None],
        run_for_key: Callable[[str], int | None],
        say: Callable[[str], None],
    ):
        self.root = Path(root)
        self.run_for_key = run_for_key
        self.spool = OtlpSpool(self.root / "otlp-spool")
        self.stop_event = threading.Event()
        self.forwarder = Forwarder(self.spool, api=api, key_for_run=key_for_run, say=say, stop=self.stop_event)
        self.server: _Server | None = None

    @property
    def port_file(self) -> Path:
        return self.root / "otlp-relay.port"

    @property
    def endpoint(self) -> str:
        """What agents get as OTEL_EXPORTER_OTLP_ENDPOINT (the exporter adds /v1/<signal>)."""
        if self.server is None:
            raise RuntimeError("the telemetry relay is not started")
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> None:
        self.server = _bind(_saved_port(self.port_file))
        self.server.relay = self
        self.port_file.write_text(f"{self.server.server_address[1]}\n")
        threading.Thread(target=self.server.serve_forever, args=(0.5,), name="otlp-relay", daemon=True).start()
        self.forwarder.start()

    def stop(self) -> None:
        self.stop_event.set()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def settle(self, run: int, *, stop: threading.Event) -> bool:
        """Wait until every export of ``run`` is with the server (its end revokes the key they carry);
        once ``stop`` is set, SETTLE_ON_STOP seconds more at most. True if none is left."""
        deadline = None
        while not self.spool.wait_run_empty(run, 0.5):
            if stop.is_set():
                deadline = deadline or time.monotonic() + SETTLE_ON_STOP
                if time.monotonic() >= deadline:
                    return False
        return True


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    relay: OtlpRelay

    def server_bind(self) -> None:
        # HTTPServer's own looks the host's name up (socket.getfqdn): a DNS wait for nothing.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]


def _saved_port(path: Path) -> int:
    with contextlib.suppress(OSError, ValueError):
        return int(path.read_text().strip())
    return 0


def _bind(port: int) -> _Server:
    """The port a runner with this root had (its agents export there), else any free one."""
    if port:
        with contextlib.suppress(OSError):
            return _Server(("127.0.0.1", port), _Handler)
    return _Server(("127.0.0.1", 0), _Handler)


class _Refused(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: an exporter sends every few seconds
    server_version = "switchyard-runner-otlp-relay"
    timeout = 120  # an idle connection is closed after this
    server: _Server

    def do_POST(self) -> None:
        signal = SIGNALS.get(self.path.split("?", 1)[0].rstrip("/"))
        if signal is None:
            return self._refuse(404, f"No OTLP endpoint {self.path[:100]!r}: POST /v1/logs, /v1/metrics or /v1/traces.")
        media = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if media not in (PROTOBUF, JSON):
            return self._refuse(415, f"Send {PROTOBUF} or {JSON}, not {media[:60] or 'no content type'!r}.")
        encoding = (self.headers.get("Content-Encoding") or "").strip().lower()
        if encoding not in ("", "identity", "gzip"):
            return self._refuse(415, f"Content-Encoding {encoding[:40]!r} is not supported: send gzip or none.")
        authorization = self.headers.get("Authorization") or ""
        if not authorization.startswith("Bearer "):
            return self._refuse(401, "Send the agent's key: Authorization: Bearer sy_...")
        try:
            body = self._body()
        except _Refused as refused:
            return self._refuse(refused.status, refused.message)
        if body is None:
            self.close_connection = True
            return None  # the exporter went away mid-body: nothing was answered, nothing kept
        relay = self.server.relay
        if relay.spool.bytes() + len(body) > SPOOL_MAX:
            return self._refuse(
                503, "The runner's telemetry spool is full: Switchyard has been away too long.", read=True
            )
        try:
            relay.spool.add(
                signal=signal,
                content_type=media,
                content_encoding="" if encoding == "identity" else encoding,
                authorization=authorization,
                run=relay.run_for_key(authorization.removeprefix("Bearer ").strip()),
                body=body,
            )
        except OSError as exc:
            return self._refuse(503, f"The runner could not keep the export: {exc}.", read=True)
        # An empty Export*ServiceResponse: everything taken (what the server says comes later).
        return self._answer(200, b"{}" if media == JSON else b"", media)

    def _body(self) -> bytes | None:
        """The body by its Content-Length, or chunked (Node's exporters stream a gzipped body so);
        None if the connection ended before all of it came."""
        if "chunked" not in (self.headers.get("Transfer-Encoding") or "").lower():
            length = self.headers.get("Content-Length") or ""
            if not length.isdigit():
                raise _Refused(411, "Send the body with a Content-Length, or chunked.")
            if int(length) > MAX_BODY:
                raise _Refused(413, f"The body is over {MAX_BODY} bytes.")
            body = self.rfile.read(int(length))
            return body if len(body) == int(length) else None
        chunks, total = [], 0
        while True:
            line = self.rfile.readline(1024)
            if not line:
                return None
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise _Refused(400, "A chunk's size line is not hexadecimal.") from None
            if size == 0:
                break
            total += size
            if total > MAX_BODY:
                raise _Refused(413, f"The body is over {MAX_BODY} bytes.")
            data = self.rfile.read(size + 2)  # the chunk and its CRLF
            if len(data) < size + 2:
                return None
            chunks.append(data[:size])
        while self.rfile.readline(8192) not in (b"\r\n", b"\n", b""):
            pass  # trailers: none that matter here
        return b"".join(chunks)

    def _refuse(self, status: int, message: str, *, read: bool = False) -> None:
        if not read:
            self.close_connection = True  # the body was not read: this connection cannot go on
        # A google.rpc.Status in JSON, as Switchyard's receiver answers a bad export.
        status_body = {"code": 3 if status < 500 else 14, "message": message}  # INVALID_ARGUMENT, UNAVAILABLE
        self._answer(status, json.dumps(status_body).encode(), JSON)

    def _answer(self, status: int, body: bytes, media: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", media)
        self.send_header("Content-Length", str(len(body)))
        if status == 503:
            self.send_header("Retry-After", "5")
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        with contextlib.suppress(OSError):
            self.wfile.write(body)

    def log_message(self, format: str, *args) -> None:
        pass  # one line per export would drown the runner's one line per run
