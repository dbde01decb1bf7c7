#!/usr/bin/env python
"""Paced (open-loop) HTTP load at a fixed rate, with latency measured from when each request was due.

A closed loop (wrk, each client sending again as soon as its answer arrives) finds the most the
server can do; its latency is then only clients / throughput (Little's law) and says nothing about
the latency at a given load. A target such as "600 req/s at p99 < 50 ms" asks for the second:
offer 600 requests a second and see how long they take. Here each connection sends on a fixed
schedule (``connections / rate`` seconds apart, the connections staggered evenly), and a request
is timed from the moment it was *due*, not from when it could be sent: when the server falls
behind, the requests that should have gone out meanwhile count the wait too (no "coordinated
omission", as wrk2 does it). Service time (from the actual send) is reported beside it.

Also the minimal HTTP/1.1 keep-alive client the other benchmarks' loaders use: httpx costs several
times more CPU per request, and the loader shares the 2 cores with the server and PostgreSQL.

Run as a child process: ``python bench/paced.py <config.json>`` prints one ``BENCHJSON {...}`` line.
Config: ``{"host", "port", "rate" (requests/s, all connections together), "duration", "warmup",
"timeout", "requests": [<one raw HTTP request per connection, latin-1 text>]}``.
"""

import asyncio
import json
import sys
import time
from pathlib import Path


async def http_call(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, raw: bytes) -> int:
    """Send one raw request on a keep-alive connection; read and drop the answer; return its status."""
    writer.write(raw)
    await writer.drain()
    line = await reader.readline()
    if not line:
        raise ConnectionError("server closed the connection")
    status = int(line.split(None, 2)[1])
    length, chunked, close = None, False, False
    while True:
        header = await reader.readline()
        if header in (b"\r\n", b"\n", b""):
            break
        name, _, value = header.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value.strip())
        elif name == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
        elif name == b"connection" and b"close" in value.lower():
            close = True
    if chunked:
        while True:
            size = int((await reader.readline()).split(b";")[0].strip(), 16)
            await reader.readexactly(size + 2)
            if size == 0:
                break
    elif length:
        await reader.readexactly(length)
    if close:
        raise ConnectionResetError("server asked to close")  # reconnect before the next request
    return status


def post_request(host: str, port: int, path: str, key: str, body: bytes) -> bytes:
    """A keep-alive POST with a bearer key and a JSON body, as raw bytes."""
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {key}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def pct(values: list[float], p: float) -> float | None:
    """Nearest-rank percentile of ``values`` (any order)."""
    if not values:
        return None
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, int(round(p / 100 * len(ordered) + 0.5)) - 1))
    return ordered[index]


class Connection:
    """One keep-alive connection that reconnects after an error."""

    def __init__(self, host: str, port: int, timeout: float):
        self.host, self.port, self.timeout = host, port, timeout
        self.reader = self.writer = None

    async def call(self, raw: bytes) -> int | None:
        try:
            if self.writer is None:
                self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
            return await asyncio.wait_for(http_call(self.reader, self.writer, raw), self.timeout)
        except (TimeoutError, OSError, ConnectionError, asyncio.IncompleteReadError, ValueError, IndexError):
            self.close()
            return None

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


async def _paced_connection(cfg: dict, index: int, raw: bytes, window: tuple[float, float], out: dict) -> None:
    count = len(cfg["requests"])
    interval = count / cfg["rate"]
    start, end = window
    connection = Connection(cfg["host"], cfg["port"], cfg["timeout"])
    # Staggered evenly, so the connections together send at an even rate, not in bursts of ``count``.
    due = start - cfg["warmup"] + index * interval / count
    while due < end:
        now = time.perf_counter()
        if due > now:
            await asyncio.sleep(due - now)
        sent = time.perf_counter()
        status = await connection.call(raw)
        done = time.perf_counter()
        if start <= due < end:
            key = str(status) if status is not None else "error"
            out["statuses"][key] = out["statuses"].get(key, 0) + 1
            out["from_due"].append(done - due)
            out["service"].append(done - sent)
            out["last_done"] = max(out["last_done"], done)
        due += interval
    connection.close()


async def paced_main(cfg: dict) -> dict:
    out = {"statuses": {}, "from_due": [], "service": [], "last_done": 0.0}
    now = time.perf_counter() + 0.2  # every connection scheduled from one clock
    window = (now + cfg["warmup"], now + cfg["warmup"] + cfg["duration"])
    requests = [raw.encode("latin-1") for raw in cfg["requests"]]
    await asyncio.gather(*(_paced_connection(cfg, i, raw, window, out) for i, raw in enumerate(requests)))
    answered = len(out["from_due"])
    # Requests due in the window over the time until the last of them was answered: a server that
    # keeps up answers them within the window, one that doesn't takes longer, and the rate falls.
    elapsed = max(cfg["duration"], out["last_done"] - window[0])
    ms = 1000.0
    return {
        "offered_per_s": cfg["rate"],
        "connections": len(requests),
        "due": answered,
        "achieved_per_s": answered / elapsed,
        "statuses": out["statuses"],
        "from_due_ms": {p: (pct(out["from_due"], q) or 0) * ms for p, q in (("p50", 50), ("p90", 90), ("p99", 99))}
        | {"max": max(out["from_due"], default=0) * ms},
        "service_ms": {p: (pct(out["service"], q) or 0) * ms for p, q in (("p50", 50), ("p90", 90), ("p99", 99))}
        | {"max": max(out["service"], default=0) * ms},
    }


def main() -> None:
    cfg = json.loads(Path(sys.argv[1]).read_text())
    print("BENCHJSON " + json.dumps(asyncio.run(paced_main(cfg))), flush=True)


if __name__ == "__main__":
    main()
