"""bench/figures.json: the latest value of every figure, one entry each, written by the benchmark that
measured it, so that bench/README.md's table (bench/report.py) cannot drift from what was measured.

Each figure is declared once in harness/catalogue.py. A benchmark records a value (and its raw
baseline's value, measured in the same run) through a Recorder; the entry gets the ratio
(value / raw), whether it passes (the aim checked against the value or the ratio, and every
condition the benchmark names, such as "no failed requests"), the date, the commit and the
machine's load. Standard library only: bench/report.py runs without the project's venv.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from harness import BENCH_DIR, RESULTS_DIR, ROOT
from harness.catalogue import CATALOGUE

FIGURES_PATH = BENCH_DIR / "figures.json"
SCHEMA = 1
# Set by bench/ab.py for the runs it makes (and by --no-record): an A/B must not replace the figures.
NO_RECORD_ENV = "SWITCHYARD_BENCH_NO_RECORD"
# Files a benchmark or the report rewrites: a change to them alone does not make the measured code dirty.
NOT_CODE = ("bench/figures.json", "bench/README.md")


# --- the entry -----------------------------------------------------------------------------------
def load_now() -> list[float]:
    """The machine's load average (1, 5, 15 minutes) now."""
    return [round(x, 2) for x in os.getloadavg()]


def _git(*argv: str) -> str:
    done = subprocess.run(["git", *argv], cwd=ROOT, capture_output=True, text=True, check=False)
    return done.stdout.strip() if done.returncode == 0 else ""


def commit() -> str:
    """``git rev-parse --short HEAD``, plus "+dirty" when a tracked file other than NOT_CODE has changed."""
    head = _git("rev-parse", "--short", "HEAD") or "unknown"
    changed = _git("status", "--porcelain", "--untracked-files=no", "--", ".", *(f":!{p}" for p in NOT_CODE))
    return head + ("+dirty" if changed else "")


def _sig(value: float | None) -> float | None:
    """Four significant digits: enough for a figure, and figures.json's diffs stay readable."""
    return None if value is None else float(f"{value:.4g}")


def entry(
    figure_id: str,
    *,
    value: float | None,
    raw: float | None = None,
    conditions: dict[str, bool] | None = None,
    load_start: list[float],
    load_end: list[float] | None = None,
    command: str = "",
    commit_id: str | None = None,
    now: dt.datetime | None = None,
) -> dict:
    """The figures.json entry for one measured figure (``value`` None: it could not be measured)."""
    spec = CATALOGUE[figure_id]
    if raw is not None and not spec.has_raw:
        raise ValueError(f"{figure_id} has no raw baseline ({spec.raw}) but was given one")
    ratio = value / raw if value is not None and raw else None
    conditions = dict(conditions or {})
    # No aim: for information. An aim on the ratio without a raw baseline (a --no-raw run): not judged.
    unjudged = spec.aim is None or (spec.aim.on == "ratio" and ratio is None and value is not None)
    passed = None if unjudged else spec.aim.met(value, ratio) and all(conditions.values())
    return {
        "name": spec.name,
        "benchmark": spec.benchmark,
        "command": command,
        "value": _sig(value),
        "unit": spec.unit,
        "better": spec.better,
        "raw": {"what": spec.raw, "value": _sig(raw)},
        "ratio": _sig(ratio),
        "aim": None
        if spec.aim is None
        else {"text": spec.aim.text(), "on": spec.aim.on, "op": spec.aim.op, "limit": spec.aim.limit},
        "conditions": conditions,
        "passed": passed,
        "date": (now or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": commit_id if commit_id is not None else commit(),
        "load": {"start": load_start, "end": load_end or load_now(), "nproc": len(os.sched_getaffinity(0))},
    }


# --- the file --------------------------------------------------------------------------------------
def read(path: Path = FIGURES_PATH) -> dict:
    """figures.json as {"schema": 1, "figures": {id: entry}}; an empty one when the file is missing."""
    try:
        body = json.loads(path.read_text())
    except FileNotFoundError:
        return {"schema": SCHEMA, "figures": {}}
    return body


def dumps(body: dict) -> str:
    return json.dumps(body, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def write(body: dict, path: Path = FIGURES_PATH) -> None:
    """The whole file at once: a temporary file beside it, fsynced, then renamed over it."""
    fd, tmp = tempfile.mkstemp(prefix=".figures-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(dumps(body))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def _locked(lock_dir: Path):
    """Two benchmarks recording at once must not lose each other's entry: read-replace-write under a lock
    (on a file in the git-ignored results folder: the figures file itself is replaced, not rewritten)."""
    lock_dir.mkdir(parents=True, exist_ok=True)
    with open(lock_dir / ".figures.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def record(figure_id: str, path: Path = FIGURES_PATH, lock_dir: Path = RESULTS_DIR, **fields) -> dict:
    """Put the entry for ``figure_id`` (see entry()) in the file, replacing its last one; return it."""
    new = entry(figure_id, **fields)
    with _locked(lock_dir):
        body = read(path)
        body["schema"] = SCHEMA
        body.setdefault("figures", {})[figure_id] = new
        write(body, path)
    return new


class Recorder:
    """What a benchmark script records with: only its own figures (a benchmark built on another one,
    as client_bench.py on run.py, does not replace the other's), nothing when told not to, and the
    load average from ``start()`` (or from its creation) to each record."""

    def __init__(self, benchmark: str | None = None, *, enabled: bool = True, path: Path = FIGURES_PATH):
        self.benchmark = benchmark or Path(sys.argv[0]).name
        self.enabled = enabled and not os.environ.get(NO_RECORD_ENV)
        self.path = path
        self.load_start = load_now()
        self.command = " ".join(["bench/" + self.benchmark, *sys.argv[1:]])
        self.recorded: list[str] = []

    def start(self) -> None:
        """A measurement begins: its load average at the start is taken now."""
        self.load_start = load_now()

    def record(self, figure_id: str, value: float | None, **fields) -> dict | None:
        if not self.enabled or CATALOGUE[figure_id].benchmark != self.benchmark:
            return None
        fields.setdefault("load_start", self.load_start)
        written = record(figure_id, self.path, value=value, command=self.command, **fields)
        self.recorded.append(figure_id)
        return written

    def note(self) -> str:
        """A line for the end of a run: what went into figures.json."""
        if not self.enabled:
            return "figures.json: not recorded (--no-record, or run by bench/ab.py)"
        if not self.recorded:
            return "figures.json: nothing recorded"
        return f"figures.json: recorded {', '.join(self.recorded)} (make bench-report updates bench/README.md)"


def add_option(parser) -> None:
    parser.add_argument(
        "--no-record",
        action="store_true",
        help="do not write this run's figures into bench/figures.json (bench/ab.py's runs never do)",
    )
