#!/usr/bin/env python
"""Observer benchmark: latency from file close to artifact row plus verified backup, and a burst.

One run:
  1. a fresh PostgreSQL database (created, migrated, dropped at the end unless --keep-db) and
     fresh file roots in a temporary folder;
  2. ``manage.py observe`` started as its own process against them, and one session workspace;
  3. latency: --files files written one at a time into work_products/ (open, write, close);
     for each, the time from close until its ArtifactVersion row exists with a backup_location
     (polled from this process on its own connection), then p50 / p95 / p99;
  4. burst: --burst files written as fast as possible into work_products/burst/, then the time
     until every one has a backed-up version, and how many never got one (missed: must be 0);
  5. every backup read back and its sha256 compared with its row;
  6. a raw baseline on the same disk: the same writes, each followed by `cp` of the file into a
     backup folder (latency: close -> cp done), and for the burst the same writes then one
     `cp -r`; printed beside ours as ratios.

Run: .venv/bin/python bench/observer_bench.py              (about two minutes)
     .venv/bin/python bench/observer_bench.py --help
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import ROOT, percentile, say
from harness.db import database_name, drop_database_url, recreate_database_url
from harness.figures import Recorder, add_option
from harness.server import manage


def summary_ms(values: list[float]) -> dict:
    return {
        "p50_ms": round(percentile(values, 50) * 1000, 2),
        "p95_ms": round(percentile(values, 95) * 1000, 2),
        "p99_ms": round(percentile(values, 99) * 1000, 2),
        "max_ms": round(max(values) * 1000, 2),
        "mean_ms": round(statistics.fmean(values) * 1000, 2),
    }


def payload(n: int, size: int) -> bytes:
    line = f"file {n:06d} ".encode()
    return (line * (size // len(line) + 1))[:size]


def write_file(path: Path, data: bytes) -> None:
    with open(path, "wb") as out:
        out.write(data)


# --- the observer process -------------------------------------------------------------------


def environment(database_url: str, roots: dict[str, Path], settle_ms: int) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings.local",
        DEBUG="0",
        LOG_LEVEL="INFO",
        DATABASE_URL=database_url,
        OBSERVER_SETTLE_MS=str(settle_ms),
        **{name: str(path) for name, path in roots.items()},
    )
    return env


class Observer:
    def __init__(self, env: dict, log_path: Path, workers: int | None):
        self.log_path = log_path
        self.log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        command = [sys.executable, "manage.py", "observe"]
        if workers:
            command += ["--workers", str(workers)]
        self.process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while b"Observing" not in log_path.read_bytes():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the observer did not start:\n{self.output()}")
            time.sleep(0.05)

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


class Rows:
    """Reads the observer's results on a connection of its own (autocommit, so every poll is fresh)."""

    def __init__(self, database_url: str, workspace_id: int):
        import psycopg

        self.conn = psycopg.connect(database_url, autocommit=True)
        self.workspace_id = workspace_id

    def backed_up(self, path: str) -> bool:
        row = self.conn.execute(
            "SELECT 1 FROM workspaces_artifactversion v JOIN workspaces_artifact a ON a.id = v.artifact_id "
            "WHERE a.workspace_id = %s AND a.path = %s AND v.backup_location <> '' LIMIT 1",
            (self.workspace_id, path),
            prepare=True,
        ).fetchone()
        return row is not None

    def backed_up_count(self, prefix: str) -> int:
        return self.conn.execute(
            "SELECT count(DISTINCT a.id) FROM workspaces_artifactversion v "
            "JOIN workspaces_artifact a ON a.id = v.artifact_id "
            "WHERE a.workspace_id = %s AND a.path LIKE %s AND v.backup_location <> ''",
            (self.workspace_id, prefix + "%"),
        ).fetchone()[0]

    def versions(self) -> list[tuple[str, int, str, str]]:
        return self.conn.execute(
            "SELECT a.path, v.number, v.sha256, v.backup_location FROM workspaces_artifactversion v "
            "JOIN workspaces_artifact a ON a.id = v.artifact_id WHERE a.workspace_id = %s",
            (self.workspace_id,),
        ).fetchall()


def workspace_create(env: dict) -> tuple[int, Path]:
    code = "from workspaces.files.services import workspace_create_for_session as c; w = c(); print(w.pk, w.root_path)"
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    pk, root = done.stdout.strip().splitlines()[-1].split(" ", 1)
    return int(pk), Path(root)


# --- the measurements -----------------------------------------------------------------------


def measure_latency(
    rows: Rows, work: Path, count: int, size: int, timeout: float, settle: float
) -> tuple[list[float], int]:
    latencies, missed = [], 0
    folder = work / "latency"
    folder.mkdir()
    time.sleep(0.2)  # the folder's own watch is in place
    for n in range(count):
        name = f"file-{n:05d}.md"
        write_file(folder / name, payload(n, size))
        closed = time.perf_counter()
        deadline = closed + timeout
        # Nothing can be done before the settle time; polling then would only take CPU from
        # the observer (this machine may have two cores). After it, a query every millisecond.
        time.sleep(settle * 0.9)
        while not rows.backed_up(f"work_products/latency/{name}"):
            if time.perf_counter() > deadline:
                missed += 1
                break
            time.sleep(0.001)
        else:
            latencies.append(time.perf_counter() - closed)
        if (n + 1) % 100 == 0:
            recent = latencies[-100:] or [0.0]
            say(f"  latency: {n + 1}/{count} files, last 100 p50 {percentile(recent, 50) * 1000:.1f} ms")
    return latencies, missed


def measure_burst(rows: Rows, work: Path, count: int, size: int, stall: float) -> dict:
    folder = work / "burst"
    folder.mkdir()
    time.sleep(0.2)
    started = time.perf_counter()
    for n in range(count):
        write_file(folder / f"burst-{n:05d}.md", payload(n, size))
        if (n + 1) % 5000 == 0:
            say(f"  burst: {n + 1}/{count} written")
    written = time.perf_counter() - started
    say(f"  burst: all {count} written in {written:.1f}s; waiting for the backups")
    done, last_progress, last_count = 0, time.perf_counter(), -1
    while done < count and time.perf_counter() - last_progress < stall:
        time.sleep(0.25)
        done = rows.backed_up_count("work_products/burst/")
        if done != last_count:
            if done // 2000 != last_count // 2000:
                say(f"  burst: {done}/{count} backed up")
            last_count, last_progress = done, time.perf_counter()
    total = last_progress - started
    return {
        "files": count,
        "written_s": round(written, 2),
        "all_backed_up_s": round(total, 2),
        "files_per_s": round(done / total, 1) if total else None,
        "missed": count - done,
    }


def raw_latency(scratch: Path, count: int, size: int) -> list[float]:
    source, backup = scratch / "raw-src", scratch / "raw-backup"
    source.mkdir()
    backup.mkdir()
    latencies = []
    for n in range(count):
        path = source / f"file-{n:05d}.md"
        write_file(path, payload(n, size))
        closed = time.perf_counter()
        subprocess.run(["cp", str(path), str(backup / f"{path.name}.v1")], check=True)
        latencies.append(time.perf_counter() - closed)
    return latencies


def raw_burst(scratch: Path, count: int, size: int) -> float:
    source = scratch / "raw-burst"
    source.mkdir()
    started = time.perf_counter()
    for n in range(count):
        write_file(source / f"burst-{n:05d}.md", payload(n, size))
    subprocess.run(["cp", "-r", str(source), str(scratch / "raw-burst-backup")], check=True)
    return time.perf_counter() - started


def verify_backups(rows: Rows) -> tuple[int, int]:
    checked = mismatched = 0
    for _path, _number, digest, location in rows.versions():
        if not location:
            continue
        checked += 1
        if hashlib.sha256(Path(location).read_bytes()).hexdigest() != digest:
            mismatched += 1
    return checked, mismatched


# --- main -----------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--database-url",
        default=os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/switchyard_obsbench"),
        help="PostgreSQL URL; its database is created fresh and dropped at the end.",
    )
    parser.add_argument("--files", type=int, default=1000, help="Files for the latency run (default 1,000).")
    parser.add_argument("--burst", type=int, default=20000, help="Files in the burst (default 20,000; 0 skips it).")
    parser.add_argument("--size", type=int, default=4096, help="Bytes per file (default 4096).")
    parser.add_argument("--settle-ms", type=int, default=50, help="OBSERVER_SETTLE_MS for the observer (default 50).")
    parser.add_argument("--workers", type=int, help="Observer worker threads (default: the observer's own).")
    parser.add_argument(
        "--timeout", type=float, default=30, help="Seconds one file may take before it counts as missed."
    )
    parser.add_argument("--stall", type=float, default=60, help="Burst: give up after this long without progress.")
    parser.add_argument("--no-raw", action="store_true", help="Skip the raw baseline.")
    parser.add_argument("--keep-db", action="store_true", help="Keep the database and folders for inspection.")
    parser.add_argument("--json", type=Path, help="Also write the results to this file.")
    add_option(parser)  # --no-record
    args = parser.parse_args()
    recorder = Recorder("observer_bench.py", enabled=not args.no_record)

    name = database_name(args.database_url)
    scratch = Path(tempfile.mkdtemp(prefix="observer-bench-"))
    roots = {
        "WORKSPACE_ROOT": scratch / "workspaces",
        "SAVED_REPORTS_ROOT": scratch / "saved_reports",
        "STATE_DIR": scratch / "state",
        "LOGS_ROOT": scratch / "logs",
    }
    for path in roots.values():
        path.mkdir()
    env = environment(args.database_url, roots, args.settle_ms)
    results: dict = {
        "settle_ms": args.settle_ms,
        "size_bytes": args.size,
        "cpus": os.cpu_count(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }
    observer = rows = None
    say(f"database {name}: creating and migrating; files under {scratch}")
    recreate_database_url(args.database_url)
    try:
        manage(env, "migrate", "--noinput")
        workspace_id, workspace_root = workspace_create(env)
        observer = Observer(env, scratch / "observer.log", args.workers)
        rows = Rows(args.database_url, workspace_id)
        work = workspace_root / "work_products"
        say(f"observer started (pid {observer.process.pid}); latency over {args.files} files")
        latencies, missed = measure_latency(rows, work, args.files, args.size, args.timeout, args.settle_ms / 1000)
        results["latency"] = {"files": args.files, "missed": missed, **summary_ms(latencies)}
        if args.burst:
            say(f"burst of {args.burst} files")
            results["burst"] = measure_burst(rows, work, args.burst, args.size, args.stall)
        say("reading every backup back")
        checked, mismatched = verify_backups(rows)
        results["backups"] = {"checked": checked, "sha256_mismatches": mismatched}
        log = observer.output()
        results["observer_reconciles"] = log.count("reconciled ")
        results["kernel_overflows"] = log.count("Inotify queue overflowed")
        results["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    finally:
        if rows is not None:
            rows.conn.close()
        if observer is not None:
            observer.stop()
        if not args.keep_db:
            drop_database_url(args.database_url)

    if not args.no_raw:
        say(f"raw baseline: {args.files} writes each followed by cp")
        raw = raw_latency(scratch, args.files, args.size)
        results["raw_latency"] = summary_ms(raw)
        if args.burst:
            say(f"raw baseline: {args.burst} writes then cp -r")
            results["raw_burst_s"] = round(raw_burst(scratch, args.burst, args.size), 2)
    if not args.keep_db:
        shutil.rmtree(scratch, ignore_errors=True)

    report(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    intact = {"every backup reads back with its sha256": results["backups"]["sha256_mismatches"] == 0}
    latency = results["latency"]
    raw_p95 = results["raw_latency"]["p95_ms"] if "raw_latency" in results else None
    recorder.record(
        "observer.latency_p95",
        latency["p95_ms"],
        raw=raw_p95,
        conditions={"no file missed": latency["missed"] == 0, **intact},
    )
    if "burst" in results:
        recorder.record("observer.burst_missed", results["burst"]["missed"], conditions=intact)
    print(recorder.note())
    ok = results["latency"]["missed"] == 0 and results.get("burst", {}).get("missed", 0) == 0
    return 0 if ok and results["backups"]["sha256_mismatches"] == 0 else 1


def report(results: dict) -> None:
    latency = results["latency"]
    raw = results.get("raw_latency")
    print()
    print(
        f"observer latency, close -> artifact row + verified backup ({latency['files']} files, "
        f"{results['size_bytes']} B, settle {results['settle_ms']} ms)"
    )
    print(f"  {'':6} {'ours':>9} {'raw cp':>9} {'ratio':>7}")
    for key in ("p50_ms", "p95_ms", "p99_ms", "max_ms"):
        ours = latency[key]
        if raw:
            print(f"  {key[:-3]:6} {ours:8.1f}ms {raw[key]:8.1f}ms {ours / raw[key]:6.1f}x")
        else:
            print(f"  {key[:-3]:6} {ours:8.1f}ms")
    print(f"  missed: {latency['missed']}   target: p95 <= 100 ms -> {'PASS' if latency['p95_ms'] <= 100 else 'FAIL'}")
    if "burst" in results:
        burst = results["burst"]
        print(
            f"burst of {burst['files']} files: written in {burst['written_s']} s, all backed up after "
            f"{burst['all_backed_up_s']} s ({burst['files_per_s']} files/s), missed {burst['missed']}"
            f" -> {'PASS' if burst['missed'] == 0 else 'FAIL'}"
        )
        if "raw_burst_s" in results:
            print(
                f"  raw: same writes then cp -r: {results['raw_burst_s']} s; "
                f"ratio {burst['all_backed_up_s'] / results['raw_burst_s']:.1f}x"
            )
    backups = results["backups"]
    print(f"backups read back: {backups['checked']}, sha256 mismatches: {backups['sha256_mismatches']}")
    print(
        f"observer reconciles: {results['observer_reconciles']}, kernel queue overflows: {results['kernel_overflows']}"
    )
    print(
        f"machine: {results['cpus']} CPUs, load average {results['load_average_at_start']} at start, "
        f"{results['load_average_at_end']} at the end (other work on the machine skews the tail)"
    )


if __name__ == "__main__":
    sys.exit(main())
