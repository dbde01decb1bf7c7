"""What a benchmark leaves behind: the result table on the console, the JSON result file, and its
run wrapped so that the server, the database and the scratch folder go on every way out."""

from __future__ import annotations

import json
import os
import platform
import signal
from pathlib import Path

from harness import ROOT, BenchError, say

VERDICT = {True: "PASS", False: "FAIL", None: "info"}


def num(value, digits: int = 0) -> str:
    """A figure for the table: thousands separated, ``digits`` decimals, "-" when there is none."""
    if value is None:
        return "-"
    if isinstance(value, int) and digits == 0:
        return f"{value:,}"
    return f"{value:,.{digits}f}"


def table(header: list[str], rows: list[list]) -> str:
    """Columns left-aligned to their widest cell, two spaces apart, a rule under the header."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def figure_table(figures: list[dict]) -> str:
    """The API benchmarks' table: a figure per row (bench/run.py's add_figure), ours beside raw."""
    header = ["figure", "ours", "unit", "p50 ms", "p99 ms", "failed", "raw", "ratio", "target", "result"]
    rows = [
        [
            f["name"],
            num(f["ours"]),
            f["unit"],
            num(f["p50_ms"], 1),
            num(f["p99_ms"], 1),
            str(f["failed"]),
            num(f["raw"]),
            f"{f['ours'] / f['raw']:.2g}" if f.get("raw") else "-",
            f["target"] or "-",
            VERDICT[f["passed"]],
        ]
        for f in figures
    ]
    return table(header, rows)


def machine(postgres: str | None = None, **extra) -> dict:
    return {
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "postgres": postgres,
        **extra,
        "note": "load generator, server, PostgreSQL and Redis share these cores",
    }


def write_json(path: Path, body: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(body, indent=2, default=str))
    return path


def written(path: Path) -> None:
    print(f"\nwritten: {path.relative_to(ROOT)}")


def run_guarded(bench) -> int:
    """``bench.run()`` with SIGTERM taken as an interrupt, a BenchError said rather than raised, and
    ``bench.cleanup()`` on every way out. The exit code: the run's, 1 after an error, 130 interrupted."""

    def terminate(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, terminate)
    code = 1
    try:
        code = bench.run()
    except BenchError as exc:
        say(f"ERROR: {exc}")
    except KeyboardInterrupt:
        say("interrupted")
        code = 130
    finally:
        bench.cleanup()
    return code


def missed_targets_note(code: int, figures: list[dict]) -> None:
    if code == 0 and not all(f["passed"] in (True, None) for f in figures):
        print("some targets were missed (see FAIL rows); the run itself completed")
