"""The HTTP server's limits on what a client may send and how long it may hold a connection.

Uvicorn's httptools protocol (the one uvicorn picks, and the one gunicorn's UvicornWorker runs in
production) has no limit on the size or number of request headers and no timeout between the bytes
of a request body: 2 MB of headers, 20,000 headers, or a body that stops half-way were accepted and
held a connection for as long as the client liked. ``LimitedHttpToolsProtocol`` adds them; uvicorn's
own ``timeout_keep_alive`` and ``limit_concurrency`` cover idle connections and their number.

Both servers use these: ``config.gunicorn_worker.UvicornWorker`` (the Procfile's web process) and
``python -m config.http_server`` (the web child of ``manage.py serve``). README "Limits" lists them.
"""

import asyncio

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from config.env import env_int, env_str

# The request line and headers together, in bytes (nginx allows 4 x 8 KB by default).
MAX_HEADER_BYTES = env_int("HTTP_MAX_HEADER_BYTES", 64 * 1024, minimum=1024)
# Header fields per request (Apache's LimitRequestFields).
MAX_HEADERS = env_int("HTTP_MAX_HEADERS", 100, minimum=10)
# The request line and headers must all arrive within this long of their first byte.
HEAD_TIMEOUT_SECONDS = env_int("HTTP_HEAD_TIMEOUT_SECONDS", 20, minimum=1)
# A request body that sends nothing for this long (while the server is ready to read) is dropped.
BODY_IDLE_TIMEOUT_SECONDS = env_int("HTTP_BODY_IDLE_TIMEOUT_SECONDS", 30, minimum=1)
# An idle keep-alive connection is closed after this long.
KEEPALIVE_SECONDS = env_int("HTTP_KEEPALIVE_SECONDS", 5, minimum=1)
# Connections (websockets included) one server process holds at once; beyond it new requests get 503.
MAX_CONNECTIONS = env_int("HTTP_MAX_CONNECTIONS", 1000, minimum=1)
# The proxies whose X-Forwarded-For and X-Forwarded-Proto are believed (addresses or networks, comma
# separated, or *), set on purpose where one fronts the web process; by default none. uvicorn's own
# default believes 127.0.0.1, where local agents and runners connect from: any of them could then name
# another address per request and walk past the login lockout, which counts failures per address.
FORWARDED_ALLOW_IPS = env_str("FORWARDED_ALLOW_IPS", "").strip()


class RequestRefused(Exception):
    """Raised in a parser callback to stop parsing a request we have already answered."""


class LimitedHttpToolsProtocol(HttpToolsProtocol):
    def connection_made(self, transport: asyncio.Transport) -> None:
        super().connection_made(transport)
        self._in_head = True  # between requests and until a request's headers are complete
        self._head_bytes = 0
        self._parsed_head_bytes = 0
        self._header_count = 0
        self._refused = False
        self._body_timer: asyncio.TimerHandle | None = None
        # A connection that never sends a byte is held no longer than a slow request head.
        self._head_timer: asyncio.TimerHandle | None = self.loop.call_later(HEAD_TIMEOUT_SECONDS, self._head_too_slow)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timers()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None
        if self._in_head:
            self._head_bytes += len(data)
        super().data_received(data)
        if self._refused or self.transport.is_closing():
            return
        if self._in_head and self._head_bytes > MAX_HEADER_BYTES:
            self._refuse(431, "Request header fields too large.")
        elif self._awaiting_body():
            self._body_timer = self.loop.call_later(BODY_IDLE_TIMEOUT_SECONDS, self._body_idle)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._header_count = 0
        self._parsed_head_bytes = 0
        if self._head_timer is not None:
            self._head_timer.cancel()
        self._head_timer = self.loop.call_later(HEAD_TIMEOUT_SECONDS, self._head_too_slow)

    def on_url(self, url: bytes) -> None:
        self._count_parsed_head(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        if self._header_count > MAX_HEADERS:
            self._refuse(431, f"More than {MAX_HEADERS} request header fields.")
            raise RequestRefused
        self._count_parsed_head(len(name) + len(value) + 4)  # ": " and CRLF
        super().on_header(name, value)

    def _count_parsed_head(self, size: int) -> None:
        """The head's size as the parser hands it over. data_received's count alone misses a head that
        arrives whole in one read (one 128 KB header sent at once): the parser reaches its end inside
        that call, before the count there is looked at."""
        self._parsed_head_bytes += size
        if self._parsed_head_bytes > MAX_HEADER_BYTES:
            self._refuse(431, "Request header fields too large.")
            raise RequestRefused

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._head_bytes = 0
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._in_head = True
        super().on_message_complete()

    def send_400_response(self, msg: str) -> None:
        if not self._refused:  # a refusal of ours already answered and closed
            super().send_400_response(msg)

    def _awaiting_body(self) -> bool:
        cycle = self.cycle
        return not self._in_head and cycle is not None and cycle.more_body and not cycle.response_complete

    def _head_too_slow(self) -> None:
        self._head_timer = None
        if self._in_head and not self.transport.is_closing():
            self._refuse(408, "Request headers not received in time.")

    def _body_idle(self) -> None:
        self._body_timer = None
        if not self._awaiting_body() or self.transport.is_closing():
            return
        if self.flow.read_paused:  # we are not reading (the app is busy): the client is not idle
            self._body_timer = self.loop.call_later(BODY_IDLE_TIMEOUT_SECONDS, self._body_idle)
            return
        # The app sees http.disconnect (connection_lost), as for a client that went away.
        self.logger.info("Closing a connection whose request body was idle for %ss.", BODY_IDLE_TIMEOUT_SECONDS)
        self.transport.close()

    def _refuse(self, status: int, message: str) -> None:
        """Answer ``status`` with ``Connection: close`` and close, as uvicorn does for a bad request."""
        self._refused = True
        self._cancel_timers()
        body = message.encode("ascii")
        self.transport.write(
            b"".join(
                [
                    STATUS_LINE[status],
                    b"content-type: text/plain; charset=utf-8\r\n",
                    b"content-length: " + str(len(body)).encode("ascii") + b"\r\n",
                    b"connection: close\r\n\r\n",
                    body,
                ]
            )
        )
        self.transport.close()

    def _cancel_timers(self) -> None:
        for timer in (self._head_timer, self._body_timer):
            if timer is not None:
                timer.cancel()
        self._head_timer = self._body_timer = None


def uvicorn_config_kwargs() -> dict:
    """What both servers pass to uvicorn's Config."""
    return {
        "http": LimitedHttpToolsProtocol,
        "timeout_keep_alive": KEEPALIVE_SECONDS,
        "limit_concurrency": MAX_CONNECTIONS,
        # No proxy is believed unless FORWARDED_ALLOW_IPS names one (this overrides gunicorn's own
        # --forwarded-allow-ips, which uvicorn-worker would pass on with uvicorn's 127.0.0.1 default).
        "proxy_headers": bool(FORWARDED_ALLOW_IPS),
        "forwarded_allow_ips": FORWARDED_ALLOW_IPS or None,
        # Only used if the h11 protocol is chosen instead: its bound on the request head.
        "h11_max_incomplete_event_size": MAX_HEADER_BYTES,
    }
