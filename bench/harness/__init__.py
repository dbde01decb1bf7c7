"""What every benchmark in bench/ shares: the paths, the progress line, the error, the percentile.

The rest of the harness, by what it is about:
  db      PostgreSQL databases made fresh and dropped, the kept connection, Redis flushes, Django set-up
  server  the production-style server (gunicorn), its environment, manage.py, agent keys, API calls
  load    the closed-loop load generator (wrk or bench/pyload.py), CPU accounting, waiting for quiet
  report  the result table, the JSON result file, and a benchmark's run with clean-up on every exit
  base    ServerBench: a fresh database, keys and server, with figures and details to report
  figures bench/figures.json: the latest value of each figure, recorded by the benchmark that measured it
  catalogue  every figure of figures.json declared once: name, unit, raw baseline, aim

Scripts in bench/ import it as ``harness`` (their own folder is first on sys.path).
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
BENCH_DIR = ROOT / "bench"
RESULTS_DIR = BENCH_DIR / "results"
_T0 = time.monotonic()


class BenchError(RuntimeError):
    """A benchmark cannot go on (a service missing, a command failed); its message says why."""


def say(message: str) -> None:
    """A progress line, stamped with the seconds since the benchmark started."""
    print(f"[{time.monotonic() - _T0:6.1f}s] {message}", flush=True)


def stamp() -> str:
    """The UTC time as the result files name it: 20261126T180429Z."""
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")


def percentile(values: list[float], q: float) -> float:
    """The value at rank q % of the sorted values, rounded to the nearest rank (q=50: the median)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]
