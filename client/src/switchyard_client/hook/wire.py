"""A minimal HTTP/1.1 request over a plain socket, for the hook adapter only.

The hook runs as a new process for every Claude Code event, and its whole budget is tens of
milliseconds: importing httpx costs about 90 ms here, http.client about 30 ms (ssl, email), and
even ``socket`` and ``urllib.parse`` cost several (``socket`` pulls in ``enum`` and ``selectors``,
``urllib.parse`` ``ipaddress``). So plain-http URLs (Switchyard on the same machine or network) go
through CPython's ``_socket`` directly, with the few lines of ``socket.create_connection`` and
``urllib.parse.quote`` it needs written here (tests/client/test_wire.py checks them against the
originals); an https URL falls back to httpx. One request per connection, ``Connection: close``.
"""

from __future__ import annotations

import _socket
import time

from switchyard_client.hook.lean_json import loads

# urllib.parse.quote's always-safe bytes (RFC 3986 unreserved).
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~")


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
    scheme, _, rest = url.partition("://")
    if scheme.lower() == "https":
        return _via_httpx(method, url, headers=headers, body=body, deadline=deadline)
    netloc, slash, tail = rest.partition("/")
    netloc = netloc.rpartition("@")[2]  # user:password@ is not ours to send
    host, port = split_host(netloc)
    target = "/" + tail.partition("#")[0] if slash else "/"
    lines = [f"{method} {target} HTTP/1.1", f"Host: {netloc}", "Connection: close", "Accept: application/json"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    payload = body or b""
    if body is not None or method in ("POST", "PUT", "PATCH"):
        lines.append(f"Content-Length: {len(payload)}")
    raw = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise WireError("no time left")
    chunks = []
    try:
        sock = _connect(host, port, timeout=remaining)
        try:
            sock.sendall(raw)
            while True:
                sock.settimeout(max(0.001, deadline - time.monotonic()))
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        finally:
            sock.close()
    except OSError as exc:  # refused, timeout (TimeoutError is an OSError), reset, unknown host
        raise WireError(f"{type(exc).__name__}: {exc}") from exc
    return _parse(b"".join(chunks))


def split_host(netloc: str) -> tuple[str, int]:
    """("host", port) of ``host``, ``host:port``, ``[v6]`` or ``[v6]:port``; port 80 when absent."""
    if netloc.startswith("["):
        host, _, after = netloc[1:].partition("]")
        return host, int(after[1:]) if after.startswith(":") and after[1:] else 80
    host, colon, port = netloc.rpartition(":")
    if not colon:
        return netloc or "127.0.0.1", 80
    return host or "127.0.0.1", int(port) if port else 80


def _connect(host: str, port: int, *, timeout: float):
    """``socket.create_connection((host, port), timeout)``, on ``_socket``: each address in turn."""
    # A bytes host spares getaddrinfo the idna codec's import (an ASCII name encodes the same).
    name = host.encode("ascii") if host.isascii() else host.encode("idna")
    problem: OSError | None = None
    for family, kind, proto, _canonical, address in _socket.getaddrinfo(name, port, 0, _socket.SOCK_STREAM):
        sock = _socket.socket(family, kind, proto)
        try:
            sock.settimeout(timeout)
            sock.connect(address)
            return sock
        except OSError as exc:
            sock.close()
            problem = exc
    raise problem or OSError(f"no address for {host}")


def quote(value: str, safe: str = "") -> str:
    """``urllib.parse.quote(value, safe=safe)`` for a str."""
    keep = _UNRESERVED | frozenset(safe.encode("ascii"))
    return "".join(chr(byte) if byte in keep else f"%{byte:02X}" for byte in value.encode("utf-8"))


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
        return status, loads(text) if text else None
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
