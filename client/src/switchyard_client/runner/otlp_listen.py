"""The telemetry relay's listener: the OTLP/HTTP endpoint on 127.0.0.1 that agents export to, which
answers an export only once it is in the spool (otlp_spool.py). Standard library only: it runs in the
runner (``OtlpRelay``, otlp_relay.py) or in the relay's keeper process (otlp_keeper.py), which must
stay small.
"""

from __future__ import annotations

import contextlib
import json
import socketserver
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Protocol

from switchyard_client.runner.otlp_spool import OtlpSpool

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
SIGNALS = {"/v1/logs": "logs", "/v1/metrics": "metrics", "/v1/traces": "traces"}
MAX_BODY = 16 * 1024 * 1024  # the server's API_MAX_BODY_BYTES by default: it would refuse more
SPOOL_MAX = 512 * 1024 * 1024  # past this (the server away for long), exports are refused with a 503


class Spooler(Protocol):
    """What the listener needs of whoever runs it: the spool, and the run an agent key belongs to."""

    spool: OtlpSpool

    def run_for_key(self, key: str) -> int | None: ...


class Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    relay: Spooler

    def server_bind(self) -> None:
        # HTTPServer's own looks the host's name up (socket.getfqdn): a DNS wait for nothing.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]


def saved_port(path: Path) -> int:
    with contextlib.suppress(OSError, ValueError):
        return int(path.read_text().strip())
    return 0


def bind(port: int) -> Server:
    """The port a runner with this root had (its agents export there), else any free one."""
    if port:
        with contextlib.suppress(OSError):
            return Server(("127.0.0.1", port), Handler)
    return Server(("127.0.0.1", 0), Handler)


class _Refused(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: an exporter sends every few seconds
    server_version = "switchyard-runner-otlp-relay"
    timeout = 120  # an idle connection is closed after this
    server: Server

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
