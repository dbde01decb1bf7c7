#!/usr/bin/env python
"""`switchyard runner` with candidate fixes patched in at start-up, for bench/runner_bench.py
--runner-whatif (A/B without touching the client package). Usage: runner_whatif.py FIXES runner-args...

FIXES, comma-separated:
  shared-ssl  every httpx.Client the runner makes (one per run, for the run's own key) shares one SSL
              context instead of building its own (httpx loads certifi's bundle into each: ~1 MB and
              tens of ms of CPU a client)
  chunk-1m    log chunks of 1 MiB (the server's limit) instead of 256 KiB: a quarter of the requests
              and fsyncs
  tick-50ms   the run threads look at their agent and log every 50 ms instead of 200 ms
  no-httpx-cli  httpx without its optional command line (rich, click, pygments: ~10 MB of the
              runner's RSS in this venv, where the dev tools bring them; a runner-only install of
              switchyard-client has none of them)
  stat-first  ship_log returns before opening the job log when it has not grown (a stat alone)
  idle-backoff  a run whose log has not grown for 5 ticks looks every 1 s instead of every 200 ms,
              back to 200 ms as soon as it grows (a cancel still wakes it at once)
  trace-ship  not a fix: print one line per ship_log call that sent something (bytes, chunks, ms)
"""

from __future__ import annotations

import sys


def apply(fixes: set[str]) -> None:
    unknown = fixes - {
        "shared-ssl",
        "chunk-1m",
        "tick-50ms",
        "no-httpx-cli",
        "trace-ship",
        "stat-first",
        "idle-backoff",
        "none",
        "",
    }
    if unknown:
        raise SystemExit(f"runner_whatif: unknown fix(es) {', '.join(sorted(unknown))}")
    if "no-httpx-cli" in fixes:
        for name in ("click", "rich", "pygments"):
            sys.modules[name] = None  # import fails, so httpx skips its CLI (httpx/__init__.py)
    if "shared-ssl" in fixes:
        import httpx

        context = httpx.create_ssl_context()
        original = httpx.Client.__init__

        def init(self, *args, **kwargs):
            kwargs.setdefault("verify", context)
            original(self, *args, **kwargs)

        httpx.Client.__init__ = init
    if "chunk-1m" in fixes:
        from switchyard_client.runner import logship

        logship.ship_log.__kwdefaults__["chunk"] = 1024 * 1024
    if "stat-first" in fixes:
        import os

        from switchyard_client.runner import logship

        whole = logship.ship_log

        def ship_if_grown(send, log_path, offset, **kwargs):
            try:
                if os.stat(log_path).st_size <= offset:
                    return offset
            except FileNotFoundError:
                return offset
            return whole(send, log_path, offset, **kwargs)

        logship.ship_log = ship_if_grown
    if "idle-backoff" in fixes:
        import threading

        from switchyard_client.runner.worker import RunWorker

        class AdaptiveWake(threading.Event):
            """RunWorker.wake, whose wait(TICK) in _watch stretches to 1 s while the log is idle."""

            def __init__(self, worker):
                super().__init__()
                self.worker, self.last, self.idle = worker, -1, 0

            def wait(self, timeout=None):
                shipped = self.worker.state.shipped
                self.idle = self.idle + 1 if shipped == self.last else 0
                self.last = shipped
                if timeout is not None and self.idle >= 5:
                    timeout = max(timeout, 1.0)
                return super().wait(timeout)

        plain_init = RunWorker.__init__

        def init(self, *args, **kwargs):
            plain_init(self, *args, **kwargs)
            self.wake = AdaptiveWake(self)

        RunWorker.__init__ = init
    if "trace-ship" in fixes:
        import time

        from switchyard_client.runner import logship

        shipped = logship.ship_log

        def traced(send, log_path, offset, **kwargs):
            chunks = []

            def counted(at, length, body):
                chunks.append(length)
                return send(at, length, body)

            started = time.perf_counter()
            new = shipped(counted, log_path, offset, **kwargs)
            if chunks:
                ms = (time.perf_counter() - started) * 1000
                print(f"trace-ship {log_path} +{new - offset} bytes in {len(chunks)} chunks {ms:.1f} ms", flush=True)
            return new

        logship.ship_log = traced
    if "tick-50ms" in fixes:
        from switchyard_client.runner import worker

        worker.TICK = 0.05


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    apply({f.strip() for f in sys.argv[1].split(",")})
    from switchyard_client.cli import main as cli

    return cli(["runner", *sys.argv[2:]])


if __name__ == "__main__":
    sys.exit(main())
