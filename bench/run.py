#!/usr/bin/env python
"""Switchyard load benchmark: the API under a production-style server, against PostgreSQL.

One run: a fresh database, migrations, agent keys, gunicorn with uvicorn workers, then
  events  single-event POST /api/v1/sessions/{id}/events/, 16 clients, one session each
  batch   the same endpoint with a JSON list of 100 and of 1,000 events
  claims  POST /api/v1/tasks/claim-next/ by 32 agents over N ready tasks, then double claims
each beside the same work done raw on the same database (psql COPY; a SKIP LOCKED UPDATE loop),
and a table of ours / raw / ratio / target / pass, also written to bench/results/<timestamp>.json.
The set-up, the server, the load generators and the table are bench/harness/'s.

Run: .venv/bin/python bench/run.py        (or: make bench)
     .venv/bin/python bench/run.py --help
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import secrets
import sys
import threading
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))  # when imported by another script: harness and the helpers beside it
# BenchError, CpuMeter, RESULTS_DIR, ROOT and say are also what the benchmarks built on this one use.
from harness import RESULTS_DIR, ROOT, BenchError, db, figures, report, say  # noqa: E402, F401
from harness.base import ServerBench  # noqa: E402
from harness.load import CpuMeter, Loader  # noqa: E402
from harness.server import Profiler, api_ok  # noqa: E402
from profile_summary import summarise  # noqa: E402 - a helper beside this script
from redaction_bench import EVENT_MIX  # noqa: E402 - the mixed batch payloads

PARTS = ("events", "batch", "claims")
# bench/figures.json's figure for a batch run: (payload, size) -> figure id
BATCH_FIGURES = {
    ("plain", 100): "api.batch100",
    ("plain", 1000): "api.batch1000",
    ("mixed", 1000): "redaction.batch1000_mixed",
}
TARGETS = {
    "events_rps": 600,
    "events_p99_ms": 50,
    "batch_events_per_s": 20_000,
    "claims_per_s": 500,
    "claims_p99_ms": 50,
}


# --- arguments ----------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=(
            "Load benchmark for the Switchyard API against PostgreSQL and Redis, served by gunicorn with "
            "uvicorn workers. Drops and recreates the benchmark database, migrates it, creates agent keys, "
            "starts the server, measures, stops the server, prints a table and writes bench/results/<ts>.json."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        epilog=(
            "examples: make bench | .venv/bin/python bench/run.py --parts events,claims --duration 5 | "
            "--settings bench.settings_tuned (what-if: the configuration fixes of bench/HISTORY.md) | "
            "--profile (py-spy; summary in the JSON, or: python bench/profile_summary.py FILE...)"
        ),
    )
    parser.add_argument(
        "--parts",
        default=",".join(PARTS),
        help=f"comma-separated parts to run, from: {', '.join(PARTS)}",
    )
    parser.add_argument("--duration", type=float, default=10.0, help="seconds measured per figure")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds of warm-up load before each figure")
    parser.add_argument("--clients", type=int, default=16, help="concurrent clients for single-event POSTs")
    parser.add_argument(
        "--batch-clients",
        type=int,
        default=8,
        help="concurrent clients for batch POSTs (few keep-alive connections can land on one worker: see README)",
    )
    parser.add_argument("--batch-sizes", default="100,1000", help="comma-separated batch sizes")
    parser.add_argument(
        "--batch-payload",
        choices=["plain", "mixed"],
        default="plain",
        help="plain: one log line per event (as before); mixed: bench/redaction_bench.py's EVENT_MIX, "
        "one event in ten with a secret to redact",
    )
    parser.add_argument("--agents", type=int, default=32, help="concurrent agents (keys) claiming tasks")
    parser.add_argument("--tasks", type=int, default=30_000, help="ready tasks created for the claim figure")
    parser.add_argument("--workers", type=int, default=2, help="server worker processes")
    parser.add_argument(
        "--no-reuse-port",
        dest="reuse_port",
        action="store_false",
        help="gunicorn without --reuse-port (one listening socket shared by the workers, as before 2026-11-26)",
    )
    parser.add_argument("--port", type=int, default=0, help="server port (0: a free one)")
    parser.add_argument("--db", default="switchyard_bench", help="database to drop, recreate and use")
    parser.add_argument("--pg-host", default=os.environ.get("PGHOST", "127.0.0.1"), help="PostgreSQL host")
    parser.add_argument("--pg-port", type=int, default=int(os.environ.get("PGPORT", "5432")), help="PostgreSQL port")
    parser.add_argument(
        "--pg-user", default=os.environ.get("PGUSER", "postgres"), help="PostgreSQL user (trust auth, may create DBs)"
    )
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/14", help="Redis for the app (db is flushed)")
    parser.add_argument(
        "--settings", default="config.settings.production", help="DJANGO_SETTINGS_MODULE for migrate and the server"
    )
    parser.add_argument(
        "--server",
        choices=["auto", "gunicorn", "gunicorn-legacy", "uvicorn", "gunicorn-wsgi"],
        default="auto",
        help=(
            "gunicorn: gunicorn -k uvicorn_worker.UvicornWorker (package uvicorn-worker); gunicorn-legacy: "
            "gunicorn -k uvicorn.workers.UvicornWorker (deprecated in uvicorn); uvicorn: uvicorn --workers N; "
            "auto: the first of these that is installed; gunicorn-wsgi: what-if, bench/wsgi.py under gunicorn "
            "-k gthread --threads 16 (no websockets)"
        ),
    )
    parser.add_argument(
        "--loader",
        choices=["auto", "wrk", "python"],
        default="auto",
        help="load generator: wrk with a Lua script, or an asyncio httpx client in its own process",
    )
    parser.add_argument("--no-raw", action="store_true", help="skip the raw PostgreSQL baselines")
    parser.add_argument(
        "--no-paced",
        action="store_true",
        help="skip the paced runs (the same clients sending at the target rate, latency timed from when each "
        "request was due: bench/paced.py)",
    )
    parser.add_argument(
        "--events-rate", type=float, default=TARGETS["events_rps"], help="single-event POSTs/s offered in the paced run"
    )
    parser.add_argument(
        "--claims-rate", type=float, default=TARGETS["claims_per_s"], help="claim-next calls/s offered in the paced run"
    )
    parser.add_argument(
        "--quiet-wait",
        type=float,
        default=120.0,
        help="before each figure, wait up to this many seconds for the machine to be idle (other jobs skew figures)",
    )
    parser.add_argument(
        "--quiet-pct", type=float, default=25.0, help="machine CPU busy percent below which it counts as idle"
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="py-spy record every server worker during each measured window (bench/results/<ts>-<part>-*.txt)",
    )
    parser.add_argument("--keep-db", action="store_true", help="do not drop the benchmark database at the end")
    figures.add_option(parser)
    args = parser.parse_args(argv)
    args.parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = set(args.parts) - set(PARTS)
    if unknown or not args.parts:
        parser.error(f"--parts takes a comma-separated list from {', '.join(PARTS)}; got {unknown or 'nothing'}")
    args.batch_sizes = [int(x) for x in args.batch_sizes.split(",") if x.strip()]
    if any(size < 1 or size > 1000 for size in args.batch_sizes):
        parser.error("--batch-sizes must be between 1 and 1000 (the API's batch limit)")
    if args.duration <= 0 or args.warmup < 0:
        parser.error("--duration must be > 0 and --warmup >= 0")
    if args.clients < 1 or args.agents < 1 or args.batch_clients < 1:
        parser.error("--clients, --agents and --batch-clients must be at least 1")
    return args


# --- the benchmark --------------------------------------------------------------------------------
class Bench(ServerBench):
    def __init__(self, args: argparse.Namespace):
        super().__init__(args)
        self.loader: Loader | None = None
        self.sampler: db.ConnectionSampler | None = None
        self.profiler = Profiler(args.profile, RESULTS_DIR / self.stamp)
        if args.settings != "config.settings.production" or args.server == "gunicorn-wsgi":
            self.recorder.enabled = False  # a what-if measures a proposal, not the code: figures.json keeps the code's

    # setup ---------------------------------------------------------------------------------------
    def setup_database(self) -> None:
        super().setup_database(max(self.args.agents, self.args.clients, self.args.batch_clients))

    def start_server(self) -> None:
        self.sampler = db.ConnectionSampler(self.pg)
        self.sampler.start()
        super().start_server()
        self.loader = Loader(self.args.loader, self.server.base_url, self.workdir)

    # helpers ---------------------------------------------------------------------------------------
    def open_sessions(self, label: str, count: int) -> list[tuple[str, str]]:
        sessions = []
        for i in range(count):
            key = self.keys[i]
            body = {"id": f"bench-{label}-{i:02d}-{secrets.token_hex(3)}", "intent": f"bench {label} client {i}"}
            session = api_ok(self.server.base_url, key, "POST", "/api/v1/sessions/", body)
            sessions.append((session["id"], key))
        return sessions

    def measure(self, label: str, targets: list[dict], probe=None) -> dict:
        """Warm up, then one measured window with CPU, connection and error accounting.

        ``probe`` (optional) counts something in the database; its change over the window is
        returned as ``probe_delta`` over ``probe_seconds``."""
        self.free_db_connections(40)  # a figure must not start with connections an earlier one leaked
        idle_busy = self.wait_for_quiet(label)
        if self.args.warmup > 0:
            say(f"  {label}: warm-up {self.args.warmup:g} s, {len(targets)} connections")
            warm = self.loader.run(targets, self.args.warmup, f"{label}-warmup")
        else:
            warm = {"statuses": {}}
        log_offset = self.server.log_size()
        self.sampler.reset_window()
        say(f"  {label}: measuring {self.args.duration:g} s")
        redis_before, db_before = db.redis_connections_received(self.args.redis_url), self.pg.sessions_opened()
        self.profiler.start(self.server.worker_pids(), label, self.args.duration)
        probe_before, probe_started = (probe(), time.monotonic()) if probe else (None, None)
        with CpuMeter(self.server.worker_pids()) as cpu:
            result = self.loader.run(targets, self.args.duration, label)
        if probe:
            result["probe_delta"] = probe() - probe_before
            result["probe_seconds"] = time.monotonic() - probe_started
        profile_files = self.profiler.finish()
        redis_after, db_after = db.redis_connections_received(self.args.redis_url), self.pg.sessions_opened()
        result["warmup_statuses"] = warm["statuses"]
        result["machine_busy_pct_before"] = idle_busy
        result["cpu"] = cpu.result
        result["db_connections_peak"] = self.sampler.window_peak
        result["server_errors"] = self.server.errors_since(log_offset)
        result["seconds"] = result["duration_us"] / 1e6
        ok = sum(n for code, n in result["statuses"].items() if code.startswith("2"))
        result["ok"] = ok
        result["failed"] = sum(result["errors"].values()) - result["errors"]["status"] + (result["requests"] - ok)
        # Server CPU per request: steadier than throughput when other jobs share the machine.
        cores = os.cpu_count() or 1
        if result["requests"]:
            server_cpu_s = cpu.result.get("server_pct", 0) / 100 * cores * cpu.result["wall_s"]
            result["server_cpu_ms_per_request"] = round(1000 * server_cpu_s / result["requests"], 2)
        # Connections the server opened per request it answered: 0 means they are reused.
        if redis_before is not None and redis_after is not None and result["requests"]:
            result["redis_connections_per_request"] = round((redis_after - redis_before - 1) / result["requests"], 3)
        if db_before is not None and db_after is not None and result["requests"]:
            result["db_connections_per_request"] = round((db_after - db_before - 1) / result["requests"], 3)
        if profile_files:
            result["profile_files"] = profile_files
            result["profile"] = summarise([ROOT / f for f in profile_files])
        lat = result["latency_us"]
        say(
            f"  {label}: {ok / result['seconds']:.0f} ok req/s, p50 {lat['p50'] / 1000:.1f} ms, "
            f"p99 {lat['p99'] / 1000:.1f} ms, statuses {result['statuses']}, "
            f"CPU of 2 cores: {cpu.result['machine_busy_pct']}% busy = server {cpu.result.get('server_pct', 0)}% "
            f"+ postgres {cpu.result.get('postgres_pct', 0)}% + loader {cpu.result.get('loader_pct', 0)}% "
            f"+ others {cpu.result.get('other_processes_pct', 0)}% + unattributed {cpu.result['unattributed_pct']}%; "
            f"server CPU {result.get('server_cpu_ms_per_request')} ms/request; "
            f"new connections per request: db {result.get('db_connections_per_request')}, "
            f"redis {result.get('redis_connections_per_request')}; "
            f"db connections peak {result['db_connections_peak']}"
        )
        per_worker = sorted(cpu.result.get("per_worker_pct_of_one_core", {}).values())
        if len(per_worker) > 1 and per_worker[-1] > 60 and per_worker[0] < per_worker[-1] / 3:
            result["worker_imbalance"] = per_worker
            say(
                f"  {label}: WARNING the connections landed unevenly on the workers (CPU % of a core each: "
                f"{per_worker}); this figure uses less than the whole server"
            )
        if result["server_errors"]["count"]:
            top = result["server_errors"]["top"][0]["line"] if result["server_errors"]["top"] else "?"
            say(f"  {label}: {result['server_errors']['count']} server errors logged; most common: {top}")
        return result

    def measure_paced(self, label: str, targets: list[dict], rate: float, p99_target_ms: float) -> dict | None:
        """The same clients offering ``rate`` requests/s; latency from when each request was due.

        The closed-loop figure above is the most the server does; its latency is clients /
        throughput. The target "N/s at p99 < X ms" is latency at a load: this measures it, and
        adds a figure that passes when the server keeps up with the rate (99 % of it answered in
        time, every answer a 2xx) and p99 from the due time is under the target.
        """
        if self.args.no_paced:
            return None
        self.free_db_connections(40)
        idle_busy = self.wait_for_quiet(f"{label} paced")
        say(
            f"  {label} paced: {len(targets)} connections at {rate:g}/s in all, {self.args.warmup:g} s warm-up, "
            f"{self.args.duration:g} s measured"
        )
        log_offset = self.server.log_size()
        with CpuMeter(self.server.worker_pids()) as cpu:
            result = self.loader.run_paced(targets, rate, self.args.duration, self.args.warmup, f"{label}-paced")
        result["machine_busy_pct_before"] = idle_busy
        result["cpu"] = cpu.result
        result["server_errors"] = self.server.errors_since(log_offset)
        ok = sum(n for code, n in result["statuses"].items() if code.startswith("2"))
        result["ok"] = ok
        due, late = result["from_due_ms"], result["service_ms"]
        say(
            f"  {label} paced: offered {rate:g}/s, answered {result['achieved_per_s']:.0f}/s, statuses "
            f"{result['statuses']}; from due p50 {due['p50']:.1f} ms, p99 {due['p99']:.1f} ms, max {due['max']:.0f} ms; "
            f"service p50 {late['p50']:.1f} ms, p99 {late['p99']:.1f} ms; CPU of 2 cores: "
            f"{cpu.result['machine_busy_pct']}% busy = server {cpu.result.get('server_pct', 0)}% + postgres "
            f"{cpu.result.get('postgres_pct', 0)}% + loader {cpu.result.get('loader_pct', 0)}% + others "
            f"{cpu.result.get('other_processes_pct', 0)}%; workers (% of a core each) "
            f"{sorted(cpu.result.get('per_worker_pct_of_one_core', {}).values())}"
        )
        result["passed"] = (
            result["achieved_per_s"] >= 0.99 * rate and ok == result["due"] and due["p99"] < p99_target_ms
        )
        return result

    @staticmethod
    def paced_conditions(result: dict, rate: float) -> dict[str, bool]:
        """What a paced figure needs besides its p99 (measure_paced's pass): the server kept up."""
        return {
            f"kept up: >= 99 % of {rate:g}/s answered": result["achieved_per_s"] >= 0.99 * rate,
            "every answer a 2xx": result["ok"] == result["due"],
        }

    def add_paced_figure(self, name: str, unit: str, result: dict | None, rate: float, p99_target_ms: float) -> None:
        if result is None:
            return
        self.add_figure(
            name=name,
            unit=unit,
            ours=result["achieved_per_s"],
            p50_ms=result["from_due_ms"]["p50"],
            p99_ms=result["from_due_ms"]["p99"],
            failed=result["due"] - result["ok"],
            raw=None,
            raw_what="",
            target=f"{rate:g}/s offered: p99 from due < {p99_target_ms:g} ms",
            passed=result["passed"],
        )

    def free_db_connections(self, needed: int) -> None:
        """Restart the server when it holds so many connections that the raw baseline can't open its own."""
        in_use = self.pg.scalar("SELECT count(*) FROM pg_stat_activity")
        limit = int(self.pg.scalar("SHOW max_connections"))
        if in_use + needed + 5 <= limit:
            return
        say(f"  PostgreSQL has {in_use} of {limit} connections in use; restarting the server to free them")
        self.server.stop()
        self.server.start()

    def settle(self, count_sql: str, timeout: float = 15.0) -> None:
        """Wait until requests still in flight when the load generator stopped have committed."""
        deadline = time.monotonic() + timeout
        last = self.pg.scalar(count_sql)
        while time.monotonic() < deadline:
            time.sleep(0.5)
            now = self.pg.scalar(count_sql)
            if now == last:
                return
            last = now

    def count_events(self, sessions: list[tuple[str, str]]) -> int:
        return self.pg.scalar(
            "SELECT count(*) FROM sessions_app_streamevent WHERE session_id = ANY(%s)", [[sid for sid, _ in sessions]]
        )

    def scratch_events_table(self) -> None:
        self.pg.execute(
            "DROP TABLE IF EXISTS bench_streamevent; "
            "CREATE TABLE bench_streamevent (LIKE sessions_app_streamevent INCLUDING ALL)"
        )

    def raw_copy(self, session_ids: list[str], label: str) -> dict:
        """psql COPY of the rows the API stored for these sessions into a scratch copy of the table."""
        path = self.workdir / f"{label}.copy"
        with open(path, "wb") as fh:
            cursor = self.pg.control().cursor()
            query = "COPY (SELECT * FROM sessions_app_streamevent WHERE session_id = ANY(%s) ORDER BY id) TO STDOUT"
            with cursor.copy(query, [session_ids]) as copy:
                for chunk in copy:
                    fh.write(chunk)
        with open(path, "rb") as fh:
            rows = sum(1 for _ in fh)
        if not rows:
            return {"rows": 0, "rows_per_s": 0.0}
        self.pg.execute("TRUNCATE bench_streamevent")
        self.pg.execute("CHECKPOINT")
        started = time.monotonic()
        out = self.pg.psql("\\timing on", f"\\copy bench_streamevent FROM '{path}'")
        wall = time.monotonic() - started
        match = re.search(r"Time: ([\d.]+) ms", out)
        seconds = float(match.group(1)) / 1000 if match else wall
        path.unlink()
        return {
            "rows": rows,
            "seconds": round(seconds, 4),
            "wall_seconds_with_psql_start": round(wall, 4),
            "rows_per_s": rows / seconds,
            "how": "psql \\copy FROM file into bench_streamevent (LIKE sessions_app_streamevent INCLUDING ALL); "
            "time from psql \\timing",
        }

    def raw_inserts(self, session_ids: list[str], connections: int, seconds: float) -> dict:
        """Informational: one INSERT per transaction by N connections, as a single-event API call must do."""
        with self.pg.kept() as conn:
            cursor = conn.execute(
                "SELECT * FROM sessions_app_streamevent WHERE session_id = %s LIMIT 1", [session_ids[0]]
            )
            template = list(cursor.fetchone())
            columns = [d.name for d in cursor.description]
        keep = [i for i, c in enumerate(columns) if c != "id"]
        seq_at, session_at = columns.index("seq"), columns.index("session_id")
        names = ", ".join(f'"{columns[i]}"' for i in keep)
        sql = f"INSERT INTO bench_streamevent ({names}) VALUES ({', '.join(['%s'] * len(keep))})"
        self.pg.execute("TRUNCATE bench_streamevent")
        from psycopg.types.json import Jsonb

        latencies: list[float] = []
        lock = threading.Lock()
        clock = {}
        barrier = threading.Barrier(connections, action=lambda: clock.update(start=time.monotonic()))
        payload_at = columns.index("payload")

        def worker(n: int) -> None:
            row = list(template)
            row[session_at] = session_ids[n % len(session_ids)]
            row[payload_at] = Jsonb(row[payload_at])
            mine = []
            with self.pg.connect() as conn:
                seq = 10_000_000 * (n + 1)
                barrier.wait()
                deadline = clock["start"] + seconds
                while time.monotonic() < deadline:
                    seq += 1
                    row[seq_at] = seq
                    t = time.perf_counter()
                    conn.execute(sql, [row[i] for i in keep])
                    mine.append(time.perf_counter() - t)
            with lock:
                latencies.extend(mine)

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(connections)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - clock["start"]
        latencies.sort()
        return {
            "rows": len(latencies),
            "rows_per_s": len(latencies) / elapsed,
            "p50_ms": 1000 * latencies[len(latencies) // 2] if latencies else None,
            "p99_ms": 1000 * latencies[int(len(latencies) * 0.99)] if latencies else None,
            "how": f"{connections} psycopg connections, autocommit, one INSERT per transaction, {seconds:g} s",
        }

    # parts -------------------------------------------------------------------------------------------
    def part_events(self) -> None:
        say(f"part events: single-event POSTs, {self.args.clients} clients, one session each")
        self.recorder.start()
        sessions = self.open_sessions("events", self.args.clients)
        targets = [
            {
                "path": f"/api/v1/sessions/{sid}/events/",
                "key": key,
                "body": json.dumps(
                    {"type": "log", "payload": {"line": f"client {i}: compiling module 42 of 97, 3 warnings so far"}},
                    separators=(",", ":"),
                ),
            }
            for i, (sid, key) in enumerate(sessions)
        ]
        result = self.measure("events", targets)
        paced = self.measure_paced("events", targets, self.args.events_rate, TARGETS["events_p99_ms"])
        self.settle("SELECT count(*) FROM sessions_app_streamevent")
        stored = self.pg.scalar(
            "SELECT count(*) FROM sessions_app_streamevent WHERE session_id = ANY(%s)", [[s for s, _ in sessions]]
        )
        acknowledged = result["statuses"].get("201", 0) + result["warmup_statuses"].get("201", 0)
        # The paced run's warm-up answers are not counted, so it adds what it measured (a lower bound).
        acknowledged += paced["statuses"].get("201", 0) if paced else 0
        result["stored_rows"] = stored
        result["acknowledged"] = acknowledged
        if stored < acknowledged:
            say(f"  WARNING: {acknowledged - stored} acknowledged events are not in the database")
        rps = result["ok"] / result["seconds"]
        p99 = result["latency_us"]["p99"] / 1000
        raw = None
        if not self.args.no_raw:
            say("  events raw: psql COPY of the same rows; then single-row INSERT transactions (info)")
            self.free_db_connections(self.args.clients + 2)
            self.scratch_events_table()
            raw = self.raw_copy([s for s, _ in sessions], "events")
            raw["inserts"] = self.raw_inserts([s for s, _ in sessions], self.args.clients, min(5.0, self.args.duration))
            say(
                f"  events raw: COPY {raw['rows']} rows at {raw['rows_per_s']:.0f} rows/s; "
                f"INSERT txns {raw['inserts']['rows_per_s']:.0f} rows/s (p99 {raw['inserts']['p99_ms']:.1f} ms)"
            )
        self.details["events"] = {"api": result, "paced": paced, "raw": raw}
        passed = rps >= TARGETS["events_rps"] and p99 < TARGETS["events_p99_ms"] and result["failed"] == 0
        self.add_figure(
            name=f"events: single POST, {self.args.clients} clients",
            unit="req/s",
            ours=rps,
            p50_ms=result["latency_us"]["p50"] / 1000,
            p99_ms=p99,
            failed=result["failed"],
            raw=raw["rows_per_s"] if raw else None,
            raw_what="psql COPY rows/s",
            target=f">= {TARGETS['events_rps']} req/s, p99 < {TARGETS['events_p99_ms']} ms",
            passed=passed,
        )
        self.add_paced_figure(
            f"events: single POST, {self.args.clients} clients paced",
            "req/s",
            paced,
            self.args.events_rate,
            TARGETS["events_p99_ms"],
        )
        no_failed = {"no failed requests": result["failed"] == 0}
        self.recorder.record("api.events.rps", rps, raw=raw["rows_per_s"] if raw else None, conditions=no_failed)
        self.recorder.record("api.events.p99", p99, conditions=no_failed)
        if paced:
            conditions = self.paced_conditions(paced, self.args.events_rate)
            self.recorder.record("api.events.paced_p99", paced["from_due_ms"]["p99"], conditions=conditions)
        if raw:
            self.add_figure(
                name=f"  (info) raw 1-row INSERT txns, {self.args.clients} conns",
                unit="rows/s",
                ours=raw["inserts"]["rows_per_s"],
                p50_ms=raw["inserts"]["p50_ms"],
                p99_ms=raw["inserts"]["p99_ms"],
                failed=0,
                raw=raw["rows_per_s"],
                raw_what="psql COPY rows/s",
                target="",
                passed=None,
            )

    def part_batch(self) -> None:
        self.details["batch"] = {}
        for size in self.args.batch_sizes:
            say(f"part batch: {size} events per POST, {self.args.batch_clients} clients, one session each")
            self.recorder.start()
            sessions = self.open_sessions(f"batch{size}", self.args.batch_clients)
            targets = []
            for i, (sid, key) in enumerate(sessions):
                items = [
                    {"type": "log", "payload": {"line": f"client {i} line {n}: compiling module {n % 97} of 97"}}
                    if self.args.batch_payload == "plain"
                    else {"type": "log", "payload": EVENT_MIX[n % len(EVENT_MIX)]}
                    for n in range(size)
                ]
                targets.append(
                    {
                        "path": f"/api/v1/sessions/{sid}/events/",
                        "key": key,
                        "body": json.dumps(items, separators=(",", ":")),
                    }
                )
            result = self.measure(f"batch{size}", targets, probe=functools.partial(self.count_events, sessions))
            self.settle("SELECT count(*) FROM sessions_app_streamevent")
            stored = self.count_events(sessions)
            result["stored_rows"] = stored
            result["acknowledged_events"] = size * (
                result["statuses"].get("201", 0) + result["warmup_statuses"].get("201", 0)
            )
            if stored < result["acknowledged_events"]:
                say(f"  WARNING: {result['acknowledged_events'] - stored} acknowledged events are not in the database")
            # Events committed during the window, counted in the database. Counting answered requests
            # instead undercounts big batches: requests still in flight when the window closes are lost,
            # and at 1,000 events a request that is a large share of the window.
            events_per_s = result["probe_delta"] / result["probe_seconds"]
            result["events_per_s_from_answers"] = result["statuses"].get("201", 0) * size / result["seconds"]
            server_cpu_s = result["cpu"].get("server_pct", 0) / 100 * (os.cpu_count() or 1) * result["cpu"]["wall_s"]
            if result["probe_delta"]:
                result["server_cpu_ms_per_event"] = round(1000 * server_cpu_s / result["probe_delta"], 3)
            say(
                f"  batch{size}: {events_per_s:.0f} events/s committed during the window "
                f"({result['events_per_s_from_answers']:.0f} events/s counting only answered requests); "
                f"server CPU {result.get('server_cpu_ms_per_event')} ms/event"
            )
            raw = None
            if not self.args.no_raw:
                self.free_db_connections(2)
                self.scratch_events_table()
                raw = self.raw_copy([s for s, _ in sessions], f"batch{size}")
                say(f"  batch{size} raw: COPY {raw['rows']} rows at {raw['rows_per_s']:.0f} rows/s")
            self.details["batch"][str(size)] = {"api": result, "raw": raw}
            self.add_figure(
                name=f"batch: {size} per POST, {self.args.batch_clients} clients",
                unit="events/s",
                ours=events_per_s,
                # No answered request in the window (1,000-event batches in a short run): no latency to show.
                p50_ms=result["latency_us"]["p50"] / 1000 if result["requests"] else None,
                p99_ms=result["latency_us"]["p99"] / 1000 if result["requests"] else None,
                failed=result["failed"],
                raw=raw["rows_per_s"] if raw else None,
                raw_what="psql COPY rows/s",
                target=f">= {TARGETS['batch_events_per_s']:,} events/s",
                passed=events_per_s >= TARGETS["batch_events_per_s"] and result["failed"] == 0,
            )
            figure_id = BATCH_FIGURES.get((self.args.batch_payload, size))
            if figure_id:
                self.recorder.record(
                    figure_id,
                    events_per_s,
                    raw=raw["rows_per_s"] if raw else None,
                    conditions={"no failed requests": result["failed"] == 0},
                )

    def create_ready_tasks(self, count: int) -> None:
        """One task through the API (the orchestrate key), then cloned in SQL: fast, and whatever the columns."""
        task = api_ok(self.server.base_url, self.keys[0], "POST", "/api/v1/tasks/", {"title": "bench task 0"})
        with self.pg.kept() as conn:
            columns = [
                r[0]
                for r in conn.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = 'board_task' "
                    "AND table_schema = current_schema() ORDER BY ordinal_position"
                )
            ]
            overrides = {
                "title": "'bench task ' || g",
                "rank": "1024 * (g + 1)",
                "priority": "(ARRAY['P0','P1','P2','P3'])[1 + mod(g, 4)]",
                "status": "'ready'",
                "created_at": "now()",
                "updated_at": "now()",
            }
            names = [c for c in columns if c != "id"]
            select = ", ".join(overrides.get(c, f't."{c}"') for c in names)
            conn.execute(
                f"INSERT INTO board_task ({', '.join(f'{chr(34)}{c}{chr(34)}' for c in names)}) "
                f"SELECT {select} FROM board_task t, generate_series(1, %s) g WHERE t.id = %s",
                [count - 1, task["id"]],
            )
            conn.execute("VACUUM ANALYZE board_task")
            ready = conn.execute("SELECT count(*) FROM board_task WHERE status = 'ready'").fetchone()[0]
        say(f"  {ready} ready tasks")

    def raw_claims(self, agent_ids: list[int], seconds: float) -> dict:
        sql = (
            "UPDATE board_task SET status='in_progress', assignee_id=%s WHERE id = (SELECT id FROM board_task "
            "WHERE status='ready' AND assignee_id IS NULL ORDER BY priority, rank, id LIMIT 1 "
            "FOR UPDATE SKIP LOCKED) RETURNING id"
        )
        latencies: list[float] = []
        claimed: list[int] = []
        lock = threading.Lock()
        clock = {}
        barrier = threading.Barrier(len(agent_ids), action=lambda: clock.update(start=time.monotonic()))

        def worker(agent_id: int) -> None:
            mine, ids = [], []
            with self.pg.connect() as conn:
                conn.execute("SELECT 1")
                barrier.wait()
                deadline = clock["start"] + seconds
                while time.monotonic() < deadline:
                    t = time.perf_counter()
                    row = conn.execute(sql, [agent_id]).fetchone()
                    mine.append(time.perf_counter() - t)
                    if row is None:
                        break
                    ids.append(row[0])
                finished = time.monotonic()
            with lock:
                clock["end"] = max(clock.get("end", 0.0), finished)
                latencies.extend(mine)
                claimed.extend(ids)

        threads = [threading.Thread(target=worker, args=(a,)) for a in agent_ids]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = clock["end"] - clock["start"]
        latencies.sort()
        return {
            "claims": len(claimed),
            "distinct": len(set(claimed)),
            "claims_per_s": len(claimed) / elapsed,
            "seconds": round(elapsed, 2),
            "p50_ms": 1000 * latencies[len(latencies) // 2] if latencies else None,
            "p99_ms": 1000 * latencies[int(len(latencies) * 0.99)] if latencies else None,
            "how": f"{len(agent_ids)} psycopg connections, autocommit, UPDATE ... FOR UPDATE SKIP LOCKED RETURNING id",
        }

    def part_claims(self) -> None:
        n_agents = self.args.agents
        say(f"part claims: claim-next by {n_agents} agents over {self.args.tasks} ready tasks")
        self.recorder.start()
        self.create_ready_tasks(self.args.tasks)
        targets = [{"path": "/api/v1/tasks/claim-next/", "key": self.keys[i], "body": ""} for i in range(n_agents)]
        result = self.measure("claims", targets)
        paced = self.measure_paced("claims", targets, self.args.claims_rate, TARGETS["claims_p99_ms"])
        self.settle("SELECT count(*) FROM board_taskclaim")
        with self.pg.kept() as conn:
            # One statement, so one snapshot: every count sees the same committed claims.
            double, open_twice, claim_rows, in_progress, mismatched = conn.execute(
                "SELECT (SELECT count(*) FROM (SELECT task_id FROM board_taskclaim GROUP BY task_id "
                "        HAVING count(*) > 1) d),"
                " (SELECT count(*) FROM (SELECT task_id FROM board_taskclaim WHERE released_at IS NULL "
                "        GROUP BY task_id HAVING count(*) > 1) d),"
                " (SELECT count(*) FROM board_taskclaim),"
                " (SELECT count(*) FROM board_task WHERE status = 'in_progress'),"
                " (SELECT count(*) FROM board_taskclaim c JOIN board_task t ON t.id = c.task_id"
                "  WHERE c.released_at IS NULL"
                "  AND (t.assignee_id IS DISTINCT FROM c.agent_id OR t.status <> 'in_progress'))"
            ).fetchone()
            agent_ids = [
                r[0]
                for r in conn.execute(
                    "SELECT id FROM sessions_app_agent WHERE slug LIKE 'bench-agent-%%' ORDER BY slug LIMIT %s",
                    [n_agents],
                )
            ]
        acknowledged = result["statuses"].get("200", 0) + result["warmup_statuses"].get("200", 0)
        acknowledged += paced["statuses"].get("200", 0) if paced else 0  # its warm-up not counted: a lower bound
        result.update(
            double_claims=double,
            open_claims_twice=open_twice,
            claim_rows=claim_rows,
            tasks_in_progress=in_progress,
            claims_not_matching_task=mismatched,
            acknowledged_claims=acknowledged,
            ran_dry=result["statuses"].get("204", 0) > 0 or bool(paced and paced["statuses"].get("204", 0)),
        )
        say(
            f"  claims: {acknowledged} acknowledged, {claim_rows} TaskClaim rows, {in_progress} tasks in progress, "
            f"double claims {double}, claims whose task disagrees {mismatched}"
        )
        if claim_rows < acknowledged:
            say(f"  WARNING: {acknowledged - claim_rows} acknowledged claims have no TaskClaim row")
        if result["ran_dry"]:
            say("  WARNING: the ready queue ran dry during the window (204 answers): raise --tasks")
        raw = None
        if not self.args.no_raw:
            say("  claims raw: reset every task to ready, VACUUM, then the SKIP LOCKED UPDATE loop")
            self.free_db_connections(len(agent_ids) + 2)
            with self.pg.kept() as conn:
                conn.execute(
                    "UPDATE board_task SET status='ready', assignee_id=NULL, session_id=NULL, started_at=NULL "
                    "WHERE status <> 'ready'"
                )
                conn.execute("VACUUM ANALYZE board_task")
            raw = self.raw_claims(agent_ids, self.args.duration)
            say(
                f"  claims raw: {raw['claims']} claims at {raw['claims_per_s']:.0f}/s, p50 {raw['p50_ms']:.2f} ms, "
                f"p99 {raw['p99_ms']:.2f} ms, distinct {raw['distinct']}"
            )
        self.details["claims"] = {"api": result, "paced": paced, "raw": raw}
        rate = result["statuses"].get("200", 0) / result["seconds"]
        p99 = result["latency_us"]["p99"] / 1000
        self.add_figure(
            name=f"claims: claim-next, {n_agents} agents",
            unit="claims/s",
            ours=rate,
            p50_ms=result["latency_us"]["p50"] / 1000,
            p99_ms=p99,
            failed=result["failed"],
            raw=raw["claims_per_s"] if raw else None,
            raw_what="SKIP LOCKED UPDATE loop claims/s",
            target=f">= {TARGETS['claims_per_s']} claims/s, p99 < {TARGETS['claims_p99_ms']} ms",
            passed=rate >= TARGETS["claims_per_s"] and p99 < TARGETS["claims_p99_ms"] and result["failed"] == 0,
        )
        self.add_paced_figure(
            f"claims: claim-next, {n_agents} agents paced",
            "claims/s",
            paced,
            self.args.claims_rate,
            TARGETS["claims_p99_ms"],
        )
        self.add_figure(
            name="claims: double claims (TaskClaim rows per task > 1)",
            unit="tasks",
            ours=double,
            p50_ms=None,
            p99_ms=None,
            failed=0,
            raw=None,
            raw_what="",
            target="0",
            passed=double == 0 and open_twice == 0 and mismatched == 0 and claim_rows >= acknowledged,
        )
        no_failed = {"no failed requests": result["failed"] == 0}
        self.recorder.record("api.claims.rps", rate, raw=raw["claims_per_s"] if raw else None, conditions=no_failed)
        self.recorder.record("api.claims.p99", p99, raw=raw["p99_ms"] if raw else None, conditions=no_failed)
        if paced:
            conditions = self.paced_conditions(paced, self.args.claims_rate)
            self.recorder.record("api.claims.paced_p99", paced["from_due_ms"]["p99"], conditions=conditions)
        integrity = {
            "no task with two open claims": open_twice == 0,
            "every open claim matches its task": mismatched == 0,
            "every acknowledged claim stored": claim_rows >= acknowledged,
        }
        self.recorder.record("api.claims.double", double, conditions=integrity)

    def write_json(self) -> Path:
        return report.write_json(
            RESULTS_DIR / f"{self.stamp}.json",
            {
                "timestamp": self.stamp,
                "machine": report.machine(self.details.get("postgres_version")),
                "server": self.server.kind if self.server else None,
                "settings": self.args.settings,
                "loader": self.loader.description if self.loader else None,
                "args": dict(vars(self.args)),
                "db_connections_peak": self.sampler.peak if self.sampler else None,
                "figures": [{**f, "ratio": (f["ours"] / f["raw"]) if f.get("raw") else None} for f in self.figures],
                "details": self.details,
            },
        )

    def run(self) -> int:
        self.check_services()
        self.setup_database()
        self.start_server()
        say(
            f"load generator: {self.loader.description}; it shares the machine's {os.cpu_count()} cores with the server"
        )
        for part in PARTS:
            if part in self.args.parts:
                getattr(self, f"part_{part}")()
        return 0

    def cleanup(self) -> None:
        if self.sampler:
            self.sampler.stop()
        super().cleanup()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.chdir(ROOT)
    bench = Bench(args)
    code = report.run_guarded(bench)
    if bench.figures:
        print()
        print(bench.table())
        report.written(bench.write_json())
        if bench.server:
            print(f"server log: {bench.server.log_path.relative_to(ROOT)}")
        report.missed_targets_note(code, bench.figures)
    print(bench.recorder.note())
    return code


if __name__ == "__main__":
    sys.exit(main())
