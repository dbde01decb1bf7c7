"""A minimal HTTP/1.1 request over a plain socket, for the hook adapter only.

The hook runs as a new process for every Claude Code event, and its whole budget is tens of
milliseconds: importing httpx costs about 90 ms here, http.client about 30 ms (ssl, email), a
socket a few. So plain-http URLs (Switchyard on the same machine or network) go through this;
an https URL falls back to httpx. One request per connection, ``Connection: close``.
"""

from __future__ import annotations

import json
import socket
import time
from urllib.parse import urlsplit


class WireError(OSError):
    """No usable answer: refused, timed out, reset, or not HTTP."""


def request(
    method: str,
    url: str,
    *,
    headers: dict[str, str],
    body: bytes | None = None,
    deadline: float,
) -> tuple[int, object]:
    """(status, parsed JSON body or text) for one request that must finish before ``deadline``
    (a ``time.monotonic()`` value)."""
    parts = urlsplit(url)
    if parts.scheme == "https":
        return _via_httpx(method, url, headers=headers, body=body, deadline=deadline)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    lines = [f"{method} {target} HTTP/1.1", f"Host: {parts.netloc}", "Connection: close", "Accept: application/json"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    payload = body or b""
    if body is not None or method in ("POST", "PUT", "PATCH"):
        lines.append(f"Content-Length: {len(payload)}")
    raw = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise WireError("no time left")
    try:
        with socket.create_connection((host, port), timeout=remaining) as sock:
            sock.sendall(raw)
            chunks = []
            while True:
                sock.settimeout(max(0.001, deadline - time.monotonic()))
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
    except OSError as exc:  # refused, timeout (socket.timeout is an OSError), reset
        raise WireError(f"{type(exc).__name__}: {exc}") from exc
    return _parse(b"".join(chunks))


def _parse(data: bytes) -> tuple[int, object]:
    head, sep, rest = data.partition(b"\r\n\r\n")
    if not sep:
        raise WireError("incomplete HTTP answer")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    try:
        status = int(status_line.split(" ", 2)[1])
    except (IndexError, ValueError):
        raise WireError(f"not an HTTP answer: {status_line[:80]!r}") from None
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        rest = _dechunk(rest)
    elif "content-length" in headers:
        rest = rest[: int(headers["content-length"])]
    text = rest.decode("utf-8", errors="replace")
    try:
        return status, json.loads(text) if text else None
    except ValueError:
        return status, text[:500]


def _dechunk(data: bytes) -> bytes:
    out, pos = [], 0
    while True:
        end = data.find(b"\r\n", pos)
        if end < 0:
            raise WireError("truncated chunked body")
        size = int(data[pos:end].split(b";")[0], 16)
        if size == 0:
            return b"".join(out)
        out.append(data[end + 2 : end + 2 + size])
        pos = end + 2 + size + 2


def _via_httpx(method: str, url: str, *, headers: dict[str, str], body: bytes | None, deadline: float):
    import httpx

    try:
        response = httpx.request(
            method, url, headers=headers, content=body, timeout=max(0.05, deadline - time.monotonic())
        )
    except httpx.HTTPError as exc:
        raise WireError(f"{type(exc).__name__}: {exc}") from exc
    try:
        return response.status_code, response.json() if response.content else None
    except ValueError:
        return response.status_code, response.text[:500]
