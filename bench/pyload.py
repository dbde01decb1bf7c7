"""Fallback load generator for bench/run.py when `wrk` is not installed.

Closed-loop clients on one asyncio loop, one keep-alive connection each, in a
process of its own. It costs far more CPU per request than wrk, which matters on a
2-core machine where it shares the cores with the server: prefer wrk.

Usage: python bench/pyload.py CONFIG.json
CONFIG: {"url": "http://127.0.0.1:8000", "duration": 10, "timeout": 10,
         "targets": [{"method": "POST", "path": "/...", "headers": {...}, "body": "..."}]}
Prints one line: BENCHJSON {...} in the same shape as bench/run.py's wrk script.
"""

import asyncio
import json
import sys
import time

import httpx


async def client(target: dict, base_url: str, deadline: float, timeout: float, out: dict) -> None:
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    body = target.get("body") or b""
    async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=timeout) as http:
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            try:
                response = await http.request(
                    target.get("method", "POST"), target["path"], headers=target.get("headers"), content=body
                )
                await response.aread()
            except httpx.TimeoutException:
                out["errors"]["timeout"] += 1
                continue
            except httpx.HTTPError:
                out["errors"]["read"] += 1
                continue
            out["latencies"].append(time.perf_counter() - started)
            key = str(response.status_code)
            out["statuses"][key] = out["statuses"].get(key, 0) + 1


def percentile(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    index = min(len(values) - 1, max(0, round(p / 100 * len(values)) - 1))
    return values[index]


async def main(config: dict) -> dict:
    out = {"latencies": [], "statuses": {}, "errors": {"connect": 0, "read": 0, "write": 0, "timeout": 0}}
    started = time.perf_counter()
    deadline = started + float(config["duration"])
    await asyncio.gather(
        *(client(t, config["url"], deadline, float(config.get("timeout", 10)), out) for t in config["targets"])
    )
    elapsed = time.perf_counter() - started
    latencies = sorted(out["latencies"])
    non_2xx = sum(n for code, n in out["statuses"].items() if not code.startswith(("2", "3")))
    return {
        "requests": len(latencies),
        "duration_us": int(elapsed * 1e6),
        "errors": {**out["errors"], "status": non_2xx},
        "latency_us": {
            "p50": percentile(latencies, 50) * 1e6,
            "p90": percentile(latencies, 90) * 1e6,
            "p99": percentile(latencies, 99) * 1e6,
            "max": (latencies[-1] if latencies else 0) * 1e6,
            "mean": (sum(latencies) / len(latencies) if latencies else 0) * 1e6,
        },
        "statuses": out["statuses"],
    }


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as fh:
        cfg = json.load(fh)
    try:
        from uvloop import run as run_loop
    except ImportError:
        run_loop = asyncio.run
    result = run_loop(main(cfg))
    print("BENCHJSON " + json.dumps(result), flush=True)
