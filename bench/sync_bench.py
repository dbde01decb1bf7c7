#!/usr/bin/env python
"""Sync-to-db benchmark: STATE_DIR with 10,000 snapshot files into PostgreSQL.

One run: a fresh database (created, migrated, dropped at the end), a temporary STATE_DIR of
N session folders (one orchestrator.json and nine <agent>.json each), then
  first      state_sync over every file (aim: <= 10 s for 10,000 files)
  unchanged  state_sync again with nothing changed (aim: <= 1 s), best of --repeat runs
beside raw baselines on the same files and database:
  cat        `cat` of every file to /dev/null (one process, xargs)
  read       plain Python: open, read and json.loads every file
  copy       psql \\copy of the rows the first run wrote (tasks, sessions, synced files,
             events) into scratch tables LIKE the real ones INCLUDING ALL (indexes too)
and the ratios ours / raw.

The files' mtimes are set 10 minutes back, as they are for any file not written in the last
seconds: a file synced within RACY_NS (2 s) of its mtime is read once more on the next run
(see board/sync/service.py), which would make the "unchanged" figure measure that instead.

Run: .venv/bin/python bench/sync_bench.py
     .venv/bin/python bench/sync_bench.py --files 2000 --keep
     .venv/bin/python bench/sync_bench.py --help
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import db
from harness.figures import Recorder, add_option

AGENTS = ("backend", "frontend", "infrastructure", "qa", "security", "docs", "data", "design", "mobile")
WORDS = ("running", "completed", "failed", "pending", "blocked", "success", "error", "waiting", "in_progress")
COPIED_TABLES = ("board_task", "sessions_app_agentsession", "board_syncedfile", "ledger_event")


def say(message: str) -> None:
    print(message, flush=True)  # the figures here are read as a plain table, without time stamps


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Time sync-to-db (board.sync.state_sync) over N snapshot files against PostgreSQL, "
        "beside cat, a plain Python read, and psql COPY of the same rows.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--files", type=int, default=10_000, help="Snapshot files to generate (10 per session).")
    parser.add_argument("--repeat", type=int, default=3, help="Unchanged runs to time; the best is reported.")
    parser.add_argument("--pg-host", default="127.0.0.1")
    parser.add_argument("--pg-port", type=int, default=5432)
    parser.add_argument("--pg-user", default="postgres")
    parser.add_argument("--db", default="switchyard_syncbench", help="Database to create, use and drop.")
    parser.add_argument("--keep", action="store_true", help="Keep the database and the state folder afterwards.")
    parser.add_argument("--json", type=Path, help="Also write the figures to this file as JSON.")
    add_option(parser)  # --no-record
    return parser.parse_args()


def generate(state_dir: Path, files: int) -> int:
    sessions = max(1, files // (len(AGENTS) + 1))
    stamp = time.time() - 600
    written = 0
    for n in range(sessions):
        folder = state_dir / f"session-{1770000000 + n}"
        folder.mkdir(parents=True)
        documents = {
            "orchestrator": {
                "team": "engineering",
                "targetRepo": "acme/api",
                "branchName": f"feat/item-{n}",
                "priorityFile": "reports/priorities-2026-02-08.md",
                "status": "running",
                "startedAt": "2026-02-08T07:57:22.593Z",
            }
        }
        for i, agent in enumerate(AGENTS):
            documents[agent] = {
                "task": f"{agent.title()} work for priority item {n}: make it so",
                "status": WORDS[(n + i) % len(WORDS)],
                "priority": ("critical", "high", "medium", "low")[(n + i) % 4],
                "llm_used": "claude",
                "error": None,
                "startedAt": "2026-02-08T08:00:00Z",
                "completedAt": None,
            }
        for name, document in documents.items():
            path = folder / f"{name}.json"
            path.write_text(json.dumps(document, indent=2))
            os.utime(path, (stamp, stamp))
            written += 1
    return written


def time_cat(state_dir: Path) -> float:
    started = time.perf_counter()
    subprocess.run(f"find {state_dir} -name '*.json' -print0 | xargs -0 cat > /dev/null", shell=True, check=True)
    return time.perf_counter() - started


def time_python_read(state_dir: Path) -> float:
    started = time.perf_counter()
    for folder in sorted(state_dir.iterdir()):
        for path in sorted(folder.iterdir()):
            with open(path, "rb") as handle:
                json.loads(handle.read())
    return time.perf_counter() - started


def time_copy(pg: db.Pg, workdir: Path) -> tuple[float, int]:
    """psql \\copy of the rows the first sync wrote into LIKE ... INCLUDING ALL tables; (seconds, rows)."""
    commands, rows = ["\\timing on"], 0
    with pg.connect() as conn:
        for table in COPIED_TABLES:
            path = workdir / f"{table}.copy"
            with open(path, "wb") as out, conn.cursor().copy(f"COPY {table} TO STDOUT") as copy:
                for chunk in copy:
                    out.write(chunk)
            with open(path, "rb") as copied:
                rows += sum(1 for _ in copied)
            conn.execute(f"DROP TABLE IF EXISTS bench_{table}")
            conn.execute(f"CREATE TABLE bench_{table} (LIKE {table} INCLUDING ALL)")
            commands.append(f"\\copy bench_{table} FROM '{path}'")
        conn.execute("CHECKPOINT")
    output = pg.psql(*commands)
    seconds = sum(float(ms) for ms in re.findall(r"Time: ([\d.]+) ms", output)) / 1000
    return seconds, rows


def main() -> int:
    args = parse_args()
    pg = db.Pg.from_args(args)
    workdir = Path(tempfile.mkdtemp(prefix="syncbench-"))
    state_dir, logs_root = workdir / "compound-state", workdir / "logs"
    state_dir.mkdir()
    logs_root.mkdir()
    os.environ.update(
        DJANGO_SETTINGS_MODULE="config.settings.local",
        DEBUG="0",  # no query log in memory
        DATABASE_URL=pg.url(),
        STATE_DIR=str(state_dir),
        LOGS_ROOT=str(logs_root),
        SWITCHYARD_VAR_DIR=str(workdir / "var"),
        LOG_LEVEL="WARNING",
    )
    try:
        say(f"database {args.db}: create and migrate")
        pg.recreate_database()
        db.django_setup()
        from board.sync import state_sync

        say(f"generating {args.files} snapshot files in {state_dir}")
        files = generate(state_dir, args.files)

        recorder = Recorder("sync_bench.py", enabled=not args.no_record)
        say("raw: cat of every file")
        cat = min(time_cat(state_dir) for _ in range(3))
        say("raw: Python read + json.loads of every file")
        read = min(time_python_read(state_dir) for _ in range(3))

        say("first run")
        started = time.perf_counter()
        first_report = state_sync(progress=lambda message: say(f"  {message}"))
        first = time.perf_counter() - started
        assert first_report.synced == files, first_report.summary()

        unchanged_times = []
        for n in range(args.repeat):
            started = time.perf_counter()
            report = state_sync()
            unchanged_times.append(time.perf_counter() - started)
            assert (report.unchanged, report.read) == (files, 0), report.summary()
            say(f"unchanged run {n + 1}: {unchanged_times[-1]:.3f}s")
        unchanged = min(unchanged_times)

        say("raw: psql COPY of the rows the first run wrote")
        copy, rows = time_copy(pg, workdir)

        figures = {
            "files": files,
            "first_run_seconds": round(first, 3),
            "unchanged_run_seconds": round(unchanged, 3),
            "cat_seconds": round(cat, 3),
            "python_read_seconds": round(read, 3),
            "copy_seconds": round(copy, 3),
            "copy_rows": rows,
            "first_vs_read_plus_copy": round(first / (read + copy), 2),
            "unchanged_vs_cat": round(unchanged / cat, 2),
            "unchanged_vs_read": round(unchanged / read, 2),
            "first_report": first_report.as_dict(),
        }
        say("")
        say(f"{'figure':<34}{'seconds':>10}{'aim':>8}")
        say(
            f"{'first run (' + str(files) + ' files)':<34}{first:>10.3f}{'<= 10':>8}  {'PASS' if first <= 10 else 'FAIL'}"
        )
        say(
            f"{'unchanged run (best of ' + str(args.repeat) + ')':<34}{unchanged:>10.3f}{'<= 1':>8}  {'PASS' if unchanged <= 1 else 'FAIL'}"
        )
        say(f"{'raw: cat of all files':<34}{cat:>10.3f}")
        say(f"{'raw: Python read + json.loads':<34}{read:>10.3f}")
        say(f"{'raw: psql COPY of ' + str(rows) + ' rows':<34}{copy:>10.3f}")
        say(f"ratio first run / (read + COPY): {figures['first_vs_read_plus_copy']}x")
        say(
            f"ratio unchanged run / cat: {figures['unchanged_vs_cat']}x; / Python read: {figures['unchanged_vs_read']}x"
        )
        if args.json:
            args.json.write_text(json.dumps(figures, indent=2))
        recorder.record("sync.first_run", first, raw=read + copy)
        recorder.record("sync.unchanged", unchanged, raw=cat)
        say(recorder.note())
        return 0 if first <= 10 and unchanged <= 1 else 1
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep:
            pg.drop_database()
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            say(f"kept: database {args.db}, folder {workdir}")


if __name__ == "__main__":
    sys.exit(main())
