#!/usr/bin/env python
"""Workspaces benchmark (issue 3): worktree creation, worktree claim/release, big uploads.

One run against PostgreSQL and Redis, with a production-style server (gunicorn with uvicorn
workers, config.settings.production), each figure beside the same work done raw:

  worktrees  POST /api/v1/repositories/{id}/worktrees/ {"type":"feat","name":"w<i>"}, N times, on a
             real git repository of ~2,000 committed files, interleaved with a bare
             `git worktree add -b raw-<i> <path>` on the same repository: p50/p95 ms and ours/raw
  claims     32 agents (32 keys) loop POST /api/v1/worktrees/{id}/claim/ {"wait": false} over 8
             worktrees and, on 200, POST .../release/ at once (409s counted apart): grants+releases
             per second and p50/p99 of each call; then, from ledger_event, that worktree.claimed and
             worktree.released alternate strictly per worktree (zero double grants). Raw: the same
             conditional UPDATE ... RETURNING and release UPDATE by 32 psycopg connections
  upload     PUT /api/v1/sessions/{id}/files/work_products/big.bin of a 100 MB file (curl -T, streamed
             from disk) against `cp` + `sync FILE` (fsync) on the same disk: MB/s, median of 3

Prints a table (ours, raw, ratio, target, PASS/FAIL) and writes bench/results/workspaces-<ts>.json.
The set-up (database, keys, server) and the table are bench/harness/'s.

Run: .venv/bin/python bench/workspaces_bench.py          (about 2-3 minutes)
     .venv/bin/python bench/workspaces_bench.py --help
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import re
import secrets
import statistics
import string
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
PARTS = ("worktrees", "claims", "upload")
TARGETS = {"worktree_ms": 300, "claim_ops_per_s": 500, "claim_p99_ms": 20, "upload_ratio": 0.5}

sys.path.insert(0, str(BENCH_DIR))
from harness import RESULTS_DIR, ROOT, BenchError, figures, report, say  # noqa: E402
from harness.base import ServerBench  # noqa: E402
from harness.load import CpuMeter, benchjson  # noqa: E402
from harness.server import api, api_ok  # noqa: E402
from paced import http_call, pct, post_request  # noqa: E402 - a helper beside this script

# --- the claim/release load generator (runs in a child process) ---------------------------------
# bench/paced.py's minimal HTTP/1.1 keep-alive client: httpx costs several times more CPU per
# request, and the load generator shares the 2 cores with the server and PostgreSQL.


async def _agent(cfg: dict, index: int, key: str, window: tuple[float, float], out: dict) -> None:
    host, port = cfg["host"], cfg["port"]
    worktrees = cfg["worktrees"]
    rng = random.Random(cfg["seed"] * 1000 + index)
    claim_body = b'{"wait": false}'
    claims = {w: post_request(host, port, f"/api/v1/worktrees/{w}/claim/", key, claim_body) for w in worktrees}
    releases = {w: post_request(host, port, f"/api/v1/worktrees/{w}/release/", key, b"{}") for w in worktrees}
    start, end = window
    reader = writer = None
    holding = None

    async def call(raw: bytes) -> tuple[int | None, float, float]:
        nonlocal reader, writer
        t0 = time.perf_counter()
        try:
            if writer is None:
                reader, writer = await asyncio.open_connection(host, port)
            status = await asyncio.wait_for(http_call(reader, writer, raw), cfg["timeout"])
        except (TimeoutError, OSError, ConnectionError, asyncio.IncompleteReadError, ValueError, IndexError):
            if writer is not None:
                writer.close()
            reader = writer = None
            return None, t0, time.perf_counter()
        return status, t0, time.perf_counter()

    def record(kind: str, status: int | None, t0: float, t1: float) -> None:
        if t0 < start or (t1 > end and not interval):
            return  # warm-up, or (closed loop) still in flight when the window closed
        bucket = out[kind]
        key_ = str(status) if status is not None else "error"
        bucket["statuses"][key_] = bucket["statuses"].get(key_, 0) + 1
        bucket["latencies"].append(t1 - t0)
        out["last"] = max(out.get("last", 0.0), t1)

    # Paced (cfg["rate"]: claim attempts per second, all agents together): each agent tries on a
    # fixed schedule and a claim is timed from when it was due (bench/paced.py says why).
    interval = len(cfg["keys"]) / cfg["rate"] if cfg.get("rate") else None
    due = start - cfg["warmup"] + index * interval / len(cfg["keys"]) if interval else None
    while (due < end) if interval else (time.perf_counter() < end):
        if interval:
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
        worktree = rng.choice(worktrees)
        status, t0, t1 = await call(claims[worktree])
        if interval:
            t0, due = due, due + interval
        record("claim", status, t0, t1)
        if status == 200:
            holding = worktree
            status, t0, t1 = await call(releases[worktree])
            record("release", status, t0, t1)
            if status == 200:
                holding = None
    if holding is not None:  # granted but not released before the end: give it back, unmeasured
        for _ in range(3):
            status, _, _ = await call(releases[holding])
            if status in (200, 409):
                break
    if writer is not None:
        writer.close()


async def _loader_main(cfg: dict) -> dict:
    out = {kind: {"statuses": {}, "latencies": []} for kind in ("claim", "release")}
    now = time.perf_counter()
    window = (now + cfg["warmup"], now + cfg["warmup"] + cfg["duration"])
    await asyncio.gather(*(_agent(cfg, i, key, window, out) for i, key in enumerate(cfg["keys"])))
    last = out.pop("last", window[1])
    # Paced: calls due in the window over the time until the last was answered (a server that
    # falls behind takes longer than the window, and its rate falls).
    seconds = max(cfg["duration"], last - window[0]) if cfg.get("rate") else cfg["duration"]
    result = {"seconds": seconds, "warmup": cfg["warmup"], "offered_attempts_per_s": cfg.get("rate")}
    for kind, data in out.items():
        lat = data["latencies"]
        result[kind] = {
            "statuses": data["statuses"],
            "calls": len(lat),
            "p50_ms": (pct(lat, 50) or 0) * 1000,
            "p90_ms": (pct(lat, 90) or 0) * 1000,
            "p99_ms": (pct(lat, 99) or 0) * 1000,
            "max_ms": (max(lat) if lat else 0) * 1000,
        }
    return result


def loader_child(config_path: str) -> None:
    cfg = json.loads(Path(config_path).read_text())
    try:
        from uvloop import run as run_loop
    except ImportError:
        run_loop = asyncio.run
    print("BENCHJSON " + json.dumps(run_loop(_loader_main(cfg))), flush=True)


# --- arguments ----------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=(
            "Workspaces benchmark (issue 3): worktree creation against bare `git worktree add`, worktree "
            "claim/release throughput with 32 contenders against the raw conditional UPDATE, and a 100 MB upload "
            "against `cp` + fsync. Drops and recreates the database, migrates it, creates agent keys, builds a git "
            "repository in a temporary folder, starts gunicorn (uvicorn workers, production settings), measures, "
            "stops the server, prints a table and writes bench/results/workspaces-<ts>.json."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, from: {', '.join(PARTS)}")
    parser.add_argument("--worktrees", type=int, default=20, help="worktrees created through the API (and raw)")
    parser.add_argument("--repo-files", type=int, default=2000, help="files committed in the test repository")
    parser.add_argument("--agents", type=int, default=32, help="contending agents (one key each) for claims")
    parser.add_argument("--claim-worktrees", type=int, default=8, help="worktrees the agents contend for")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds measured for claims (and raw)")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds of unmeasured claim load first")
    parser.add_argument("--upload-mb", type=int, default=100, help="size of the uploaded file, MB")
    parser.add_argument("--repeat", type=int, default=3, help="upload and cp repeats (median reported)")
    parser.add_argument("--workers", type=int, default=2, help="server worker processes")
    parser.add_argument(
        "--no-reuse-port",
        dest="reuse_port",
        action="store_false",
        help="as in bench/run.py: gunicorn without --reuse-port (one listening socket shared by the workers)",
    )
    parser.add_argument("--port", type=int, default=0, help="server port (0: a free one)")
    parser.add_argument(
        "--server",
        choices=["auto", "gunicorn", "gunicorn-legacy", "uvicorn"],
        default="auto",
        help="as in bench/run.py: gunicorn -k uvicorn_worker.UvicornWorker when installed",
    )
    parser.add_argument("--db", default="switchyard_wsbench", help="database to drop, recreate and use")
    parser.add_argument("--pg-host", default=os.environ.get("PGHOST", "127.0.0.1"), help="PostgreSQL host")
    parser.add_argument("--pg-port", type=int, default=int(os.environ.get("PGPORT", "5432")), help="PostgreSQL port")
    parser.add_argument("--pg-user", default=os.environ.get("PGUSER", "postgres"), help="PostgreSQL user (trust)")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/12", help="Redis for the app (db is flushed)")
    parser.add_argument("--settings", default="config.settings.production", help="DJANGO_SETTINGS_MODULE")
    parser.add_argument("--workdir", default=None, help="parent of the temporary folder (default: system temp)")
    parser.add_argument(
        "--quiet-wait", type=float, default=30.0, help="wait up to this long for an idle machine before each part"
    )
    parser.add_argument("--quiet-pct", type=float, default=25.0, help="machine busy percent that counts as idle")
    parser.add_argument("--no-raw", action="store_true", help="skip the raw baselines")
    parser.add_argument(
        "--no-paced", action="store_true", help="skip the paced claim run (a fixed rate of attempts, bench/paced.py)"
    )
    parser.add_argument(
        "--paced-rate",
        type=float,
        default=350.0,
        help="claim attempts/s offered in the paced run (about three in four are granted, and each grant adds "
        "its release: about 500 grants+releases/s)",
    )
    parser.add_argument("--keep-db", action="store_true", help="do not drop the database at the end")
    parser.add_argument("--seed", type=int, default=1, help="seed for the agents' choice of worktree")
    parser.add_argument("--loader-child", help=argparse.SUPPRESS)
    figures.add_option(parser)
    args = parser.parse_args(argv)
    if args.loader_child:
        return args
    args.parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = set(args.parts) - set(PARTS)
    if unknown or not args.parts:
        parser.error(f"--parts takes a comma-separated list from {', '.join(PARTS)}; got {unknown or 'nothing'}")
    if "claims" in args.parts and args.claim_worktrees > args.worktrees:
        parser.error("--claim-worktrees must not exceed --worktrees (the claims use the created worktrees)")
    if min(args.worktrees, args.agents, args.claim_worktrees, args.repeat, args.upload_mb) < 1:
        parser.error("counts and sizes must be at least 1")
    if args.duration <= 0 or args.warmup < 0:
        parser.error("--duration must be > 0 and --warmup >= 0")
    return args


# --- the benchmark --------------------------------------------------------------------------------
class WorkspacesBench(ServerBench):
    key_prefix = "bench-ws-"
    quiet_poll = 3.0

    def __init__(self, args: argparse.Namespace):
        super().__init__(args, workdir_prefix="switchyard-wsbench-", workdir_parent=args.workdir)
        self.agent_ids: list[int] = []
        self.repo_path = self.workdir / "repos" / "proj"
        self.repository_id: int | None = None
        self.worktree_ids: list[int] = []
        self.details["workdir"] = str(self.workdir)

    def server_env(self) -> dict:
        env = super().server_env()
        var = self.workdir / "var"
        env.update(
            {
                "WORKSPACE_ROOT": str(var / "workspaces"),
                "EXPORT_ROOTS": str(var / "exports"),
                "ARCHIVE_ROOT": str(var / "archives"),
                "LOGS_ROOT": str(var / "logs"),
                "GIT_CONFIG_NOSYSTEM": "1",
                "GIT_AUTHOR_NAME": "bench",
                "GIT_AUTHOR_EMAIL": "bench@example.invalid",
                "GIT_COMMITTER_NAME": "bench",
                "GIT_COMMITTER_EMAIL": "bench@example.invalid",
            }
        )
        return env

    # setup ---------------------------------------------------------------------------------------
    def setup(self) -> None:
        self.check_services()
        self.setup_database(self.args.agents)
        self.agent_ids = [
            r[0]
            for r in self.pg.control().execute(
                "SELECT id FROM sessions_app_agent WHERE slug LIKE 'bench-ws-%%' ORDER BY slug"
            )
        ]
        if "worktrees" in self.args.parts or "claims" in self.args.parts:
            self.make_repository()

    def git(self, *argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
        done = subprocess.run(
            ["git", *argv], cwd=cwd or self.repo_path, env=self.env, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise BenchError(f"git {' '.join(argv)} failed: {done.stderr.strip()}")
        return done

    def make_repository(self) -> None:
        files = self.args.repo_files
        say(f"git repository with {files} files in {self.repo_path}")
        rng = random.Random(7)
        words = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 9))) for _ in range(2000)]
        per_dir = 50
        for i in range(files):
            folder = self.repo_path / "src" / f"pkg{i // per_dir:03d}"
            folder.mkdir(parents=True, exist_ok=True)
            lines = [" ".join(rng.choices(words, k=10)) for _ in range(rng.randint(10, 60))]
            (folder / f"mod{i % per_dir:02d}.py").write_text("\n".join(lines) + "\n")
        self.git("init", "-q", "-b", "main")
        self.git("add", "-A")
        self.git("commit", "-q", "-m", "bench repository")
        tracked = len(self.git("ls-files").stdout.splitlines())
        out = self.manage("register_repository", str(self.repo_path))
        match = re.search(r"\(id (\d+)\)", out)
        if not match:
            raise BenchError(f"register_repository printed no id: {out!r}")
        self.repository_id = int(match.group(1))
        size = sum(p.stat().st_size for p in (self.repo_path / "src").rglob("*") if p.is_file())
        self.details["repository"] = {"files": tracked, "bytes": size, "id": self.repository_id}
        say(f"  {tracked} files ({size / 1e6:.1f} MB) committed; registered as repository {self.repository_id}")

    def start_server(self) -> None:
        super().start_server(RESULTS_DIR / f"workspaces-{self.stamp}-server.log")

    # 1. worktree creation ------------------------------------------------------------------------
    def part_worktrees(self) -> None:
        n = self.args.worktrees
        say(f"part worktrees: {n} through the API, {n} bare `git worktree add`, interleaved")
        idle = self.wait_for_quiet("worktrees")
        self.recorder.start()
        base, key = self.server.base_url, self.keys[0]
        path = f"/api/v1/repositories/{self.repository_id}/worktrees/"
        ours: list[float] = []
        raw: list[float] = []

        def api_one(i: int) -> None:
            t0 = time.perf_counter()
            status, body = api(base, key, "POST", path, {"type": "feat", "name": f"w{i}"})
            elapsed = time.perf_counter() - t0
            if status != 201:
                raise BenchError(f"POST {path} w{i} answered {status}: {body}")
            ours.append(elapsed)
            self.worktree_ids.append(int(body["id"]))

        def raw_one(i: int) -> None:
            target = self.repo_path.parent / f"raw-{i}"
            t0 = time.perf_counter()
            self.git("worktree", "add", "-q", "-b", f"raw-{i}", str(target))
            raw.append(time.perf_counter() - t0)

        for i in range(n):
            # Alternate which goes first, so that neither always finds the other's pages in cache.
            steps = (api_one, raw_one) if i % 2 == 0 else (raw_one, api_one)
            for step in steps:
                if step is raw_one and self.args.no_raw:
                    continue
                step(i)
            if (i + 1) % 5 == 0 or i == n - 1:
                say(
                    f"  {i + 1}/{n}: ours p50 {1000 * statistics.median(ours):.0f} ms"
                    + (f", raw p50 {1000 * statistics.median(raw):.0f} ms" if raw else "")
                )
        made = [self.repo_path.parent / f"feat-w{i}" for i in range(n)]
        checked_out = sum(1 for p in made if (p / "src" / "pkg000" / "mod00.py").exists())
        if checked_out != n:
            raise BenchError(f"only {checked_out} of {n} API worktrees are checked out on disk")
        o50, o95 = 1000 * pct(ours, 50), 1000 * pct(ours, 95)
        r50, r95 = (1000 * pct(raw, 50), 1000 * pct(raw, 95)) if raw else (None, None)
        self.details["worktrees"] = {
            "machine_busy_pct_before": idle,
            "ours_ms": [round(1000 * x, 1) for x in ours],
            "raw_ms": [round(1000 * x, 1) for x in raw],
            "ours_p50_ms": o50,
            "ours_p95_ms": o95,
            "raw_p50_ms": r50,
            "raw_p95_ms": r95,
            "ratio_p50_ours_over_raw": (o50 / r50) if r50 else None,
            "how": "ours: wall time of the POST seen by the client (urllib, new connection each); raw: wall time of "
            "`git worktree add -q -b raw-<i> <path>` run by this script on the same repository",
        }
        say(f"  worktrees: ours p50 {o50:.0f} ms p95 {o95:.0f} ms; raw p50 {r50 or 0:.0f} ms p95 {r95 or 0:.0f} ms")
        self.add_figure(
            name=f"worktree create ({n}, {self.details['repository']['files']} files), ms",
            ours=o50,
            ours_extra=f"p95 {o95:.0f}",
            raw=r50,
            raw_extra=f"p95 {r95:.0f}" if r95 else "",
            ratio=(o50 / r50) if r50 else None,
            ratio_note="time ours/raw, lower is better",
            target=f"p95 <= {TARGETS['worktree_ms']} ms",
            passed=o95 <= TARGETS["worktree_ms"],
        )
        self.recorder.record("workspaces.worktree_create_p95", o95, raw=r95)

    # 2. claims ---------------------------------------------------------------------------------------
    def part_claims(self) -> None:
        k, n_agents = self.args.claim_worktrees, self.args.agents
        if len(self.worktree_ids) < k:
            say(f"part claims: creating {k - len(self.worktree_ids)} worktrees first")
            for i in range(len(self.worktree_ids), k):
                body = api_ok(
                    self.server.base_url,
                    self.keys[0],
                    "POST",
                    f"/api/v1/repositories/{self.repository_id}/worktrees/",
                    {"type": "feat", "name": f"w{i}"},
                )
                self.worktree_ids.append(int(body["id"]))
        worktrees = self.worktree_ids[:k]
        say(f"part claims: {n_agents} agents claim/release over {k} worktrees (ids {worktrees})")
        idle = self.wait_for_quiet("claims")
        self.recorder.start()
        cfg = {
            "host": "127.0.0.1",
            "port": self.server.port,
            "keys": self.keys[:n_agents],
            "worktrees": worktrees,
            "duration": self.args.duration,
            "warmup": self.args.warmup,
            "timeout": 10,
            "seed": self.args.seed,
        }
        events_before = self.pg.scalar("SELECT coalesce(max(id), 0) FROM ledger_event")
        say(f"  claims: warm-up {self.args.warmup:g} s, then measuring {self.args.duration:g} s")
        result = self._claim_load(cfg, "claims")
        result["machine_busy_pct_before"] = idle
        claim, release = result["claim"], result["release"]
        grants, refused, released, other, seconds, ops = (
            result[name] for name in ("grants", "refused_409", "releases", "unexpected", "seconds", "ops_per_s")
        )
        paced = None
        if not self.args.no_paced:
            self.wait_for_quiet("claims paced")
            say(
                f"  claims paced: {self.args.paced_rate:g} claim attempts/s offered by the {n_agents} agents "
                f"together, each on a fixed schedule; a claim is timed from when it was due"
            )
            paced = self._claim_load(cfg | {"rate": self.args.paced_rate}, "claims paced")
        integrity = self.check_alternation(worktrees, events_before)
        result["integrity"] = integrity
        raw = None
        if not self.args.no_raw:
            raw = self.raw_claims(worktrees)
        self.details["claims"] = {"api": result, "paced": paced, "raw": raw}
        p99 = max(claim["p99_ms"], release["p99_ms"])
        self.add_figure(
            name=f"claim+release, {n_agents} agents / {k} worktrees, ops/s",
            ours=ops,
            ours_extra=f"claim p50 {claim['p50_ms']:.1f} p99 {claim['p99_ms']:.1f}; "
            f"release p50 {release['p50_ms']:.1f} p99 {release['p99_ms']:.1f} ms; {refused / seconds:.0f} 409/s",
            raw=raw["ops_per_s"] if raw else None,
            raw_extra=f"p99 {raw['claim_p99_ms']:.1f}/{raw['release_p99_ms']:.1f} ms" if raw else "",
            ratio=(ops / raw["ops_per_s"]) if raw else None,
            ratio_note="throughput ours/raw, higher is better",
            target=f">= {TARGETS['claim_ops_per_s']}/s, p99 < {TARGETS['claim_p99_ms']} ms",
            passed=ops >= TARGETS["claim_ops_per_s"] and p99 < TARGETS["claim_p99_ms"] and not other,
        )
        if paced:
            p_claim, p_release = paced["claim"], paced["release"]
            self.add_figure(
                name=f"  the same paced: {self.args.paced_rate:g} claim attempts/s offered, ops/s",
                ours=paced["ops_per_s"],
                ours_extra=f"claim (from due) p50 {p_claim['p50_ms']:.1f} p99 {p_claim['p99_ms']:.1f}; "
                f"release p50 {p_release['p50_ms']:.1f} p99 {p_release['p99_ms']:.1f} ms; "
                f"{paced['refused_409'] / paced['seconds']:.0f} 409/s",
                raw=None,
                raw_extra="",
                ratio=None,
                ratio_note="",
                target=f">= {TARGETS['claim_ops_per_s']}/s, p99 < {TARGETS['claim_p99_ms']} ms",
                passed=paced["ops_per_s"] >= TARGETS["claim_ops_per_s"]
                and max(p_claim["p99_ms"], p_release["p99_ms"]) < TARGETS["claim_p99_ms"]
                and not paced["unexpected"],
            )
        self.add_figure(
            name="double grants (ledger: claimed/released alternate per worktree)",
            ours=integrity["double_grants"],
            ours_extra=f"{integrity['claimed_events']} claimed / {integrity['released_events']} released events",
            raw=None,
            raw_extra="",
            ratio=None,
            ratio_note="",
            target="0",
            passed=integrity["ok"],
        )
        record = self.recorder.record
        raw_p99 = max(raw["claim_p99_ms"], raw["release_p99_ms"]) if raw else None
        expected = {"no answer but 200 and 409": not other}
        record("workspaces.claims.ops", ops, raw=raw["ops_per_s"] if raw else None, conditions=expected)
        record("workspaces.claims.p99", p99, raw=raw_p99, conditions=expected)
        if paced:
            expected = {"no answer but 200 and 409": not paced["unexpected"]}
            record("workspaces.claims.paced_ops", paced["ops_per_s"], conditions=expected)
            paced_p99 = max(paced["claim"]["p99_ms"], paced["release"]["p99_ms"])
            record("workspaces.claims.paced_p99", paced_p99, conditions=expected)
        alternating = {"the ledger alternates claimed and released per worktree": integrity["ok"]}
        record("workspaces.claims.double", integrity["double_grants"], conditions=alternating)

    def _claim_load(self, cfg: dict, label: str) -> dict:
        """Run the claim/release loader in a child process and summarise what it saw."""
        cfg_path = self.workdir / f"{label.replace(' ', '-')}.json"
        cfg_path.write_text(json.dumps(cfg))
        with CpuMeter(self.server.worker_pids()) as cpu:
            done = subprocess.run(
                [sys.executable, str(Path(__file__).resolve()), "--loader-child", str(cfg_path)],
                capture_output=True,
                text=True,
                check=False,
            )
        result = benchjson(done, label)
        result["cpu_including_warmup"] = cpu.result
        claim, release = result["claim"], result["release"]
        grants = claim["statuses"].get("200", 0)
        refused = claim["statuses"].get("409", 0)
        released = release["statuses"].get("200", 0)
        other = {
            **{f"claim {s}": c for s, c in claim["statuses"].items() if s not in ("200", "409")},
            **{f"release {s}": c for s, c in release["statuses"].items() if s != "200"},
        }
        seconds = result["seconds"]
        ops = (grants + released) / seconds
        result.update(grants=grants, refused_409=refused, releases=released, unexpected=other, ops_per_s=ops)
        say(
            f"  {label}: {grants / seconds:.0f} grants/s + {released / seconds:.0f} releases/s = {ops:.0f}/s; "
            f"{refused / seconds:.0f} 409s/s; claim p50 {claim['p50_ms']:.1f} p99 {claim['p99_ms']:.1f} ms; "
            f"release p50 {release['p50_ms']:.1f} p99 {release['p99_ms']:.1f} ms; unexpected {other or 'none'}; "
            f"CPU of {os.cpu_count()} cores: {cpu.result['machine_busy_pct']}% busy = server "
            f"{cpu.result.get('server_pct', 0)}% + postgres {cpu.result.get('postgres_pct', 0)}% + loader "
            f"{cpu.result.get('loader_pct', 0)}% + others {cpu.result.get('other_processes_pct', 0)}%"
        )
        return result

    def check_alternation(self, worktrees: list[int], after_id: int) -> dict:
        """Per worktree, in id order (ids are taken under the row lock, so they follow the claims), the
        ledger must read claimed, released, claimed, ... with each release naming the holder just granted."""
        deadline = time.monotonic() + 10
        last = -1
        while time.monotonic() < deadline:  # let requests in flight at the end commit
            count = self.pg.scalar("SELECT count(*) FROM ledger_event WHERE id > %s", [after_id])
            if count == last:
                break
            last = count
            time.sleep(0.5)
        rows = (
            self.pg.control()
            .execute(
                "SELECT subject_id, id, name, payload->>'holder' FROM ledger_event WHERE id > %s "
                "AND subject_type = 'worktree' AND name IN ('worktree.claimed', 'worktree.released') "
                "AND subject_id = ANY(%s) ORDER BY subject_id, id",
                [after_id, [str(w) for w in worktrees]],
            )
            .fetchall()
        )
        double = orphan_release = wrong_holder = 0
        claimed = released = 0
        state: dict[str, str | None] = {}
        for subject, _id, name, holder in rows:
            current = state.get(subject)
            if name == "worktree.claimed":
                claimed += 1
                if current is not None:
                    double += 1
                state[subject] = holder
            else:
                released += 1
                if current is None:
                    orphan_release += 1
                elif current != holder:
                    wrong_holder += 1
                state[subject] = None
        still_held_db = self.pg.scalar(
            "SELECT count(*) FROM workspaces_worktree WHERE id = ANY(%s) AND holder_id IS NOT NULL", [worktrees]
        )
        still_held_ledger = sum(1 for v in state.values() if v is not None)
        result = {
            "claimed_events": claimed,
            "released_events": released,
            "double_grants": double,
            "releases_without_claim": orphan_release,
            "releases_naming_another_holder": wrong_holder,
            "held_at_end_db": still_held_db,
            "held_at_end_ledger": still_held_ledger,
        }
        result["ok"] = double == 0 and orphan_release == 0 and wrong_holder == 0 and still_held_db == still_held_ledger
        say(
            f"  integrity: {claimed} worktree.claimed / {released} worktree.released events; double grants {double}, "
            f"releases without a claim {orphan_release}, naming another holder {wrong_holder}; held at end "
            f"{still_held_db} (db) / {still_held_ledger} (ledger)"
        )
        return result

    def raw_claims(self, worktrees: list[int]) -> dict:
        say(
            f"  claims raw: conditional UPDATE ... RETURNING + release UPDATE by {self.args.agents} psycopg connections"
        )
        self.pg.execute(
            "UPDATE workspaces_worktree SET holder_id = NULL, lease_expires_at = NULL WHERE id = ANY(%s)", [worktrees]
        )
        claim_sql = (
            "UPDATE workspaces_worktree SET holder_id = %s, claimed_at = now(), "
            "lease_expires_at = now() + interval '900 seconds', updated_at = now() "
            "WHERE id = %s AND status = 'active' AND (holder_id IS NULL OR lease_expires_at < now()) RETURNING id"
        )
        release_sql = (
            "UPDATE workspaces_worktree SET holder_id = NULL, lease_expires_at = NULL, released_at = now(), "
            "updated_at = now() WHERE id = %s AND holder_id = %s RETURNING id"
        )
        lock = threading.Lock()
        totals = {"grants": 0, "refused": 0, "releases": 0, "release_missed": 0}
        claim_lat: list[float] = []
        release_lat: list[float] = []
        clock: dict[str, float] = {}
        agents = self.agent_ids[: self.args.agents]
        barrier = threading.Barrier(len(agents), action=lambda: clock.update(start=time.monotonic()))

        def worker(index: int, agent_id: int) -> None:
            rng = random.Random(self.args.seed * 1000 + index)
            mine = {"grants": 0, "refused": 0, "releases": 0, "release_missed": 0}
            c_lat, r_lat = [], []
            with self.pg.connect() as conn:
                conn.execute("SELECT 1")
                barrier.wait()
                deadline = clock["start"] + self.args.duration
                while time.monotonic() < deadline:
                    w = rng.choice(worktrees)
                    t = time.perf_counter()
                    row = conn.execute(claim_sql, [agent_id, w]).fetchone()
                    c_lat.append(time.perf_counter() - t)
                    if row is None:
                        mine["refused"] += 1
                        continue
                    mine["grants"] += 1
                    t = time.perf_counter()
                    row = conn.execute(release_sql, [w, agent_id]).fetchone()
                    r_lat.append(time.perf_counter() - t)
                    mine["releases" if row else "release_missed"] += 1
                finished = time.monotonic()
            with lock:
                clock["end"] = max(clock.get("end", 0.0), finished)
                for name, value in mine.items():
                    totals[name] += value
                claim_lat.extend(c_lat)
                release_lat.extend(r_lat)

        threads = [threading.Thread(target=worker, args=(i, a)) for i, a in enumerate(agents)]
        with CpuMeter([]) as cpu:
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        elapsed = clock["end"] - clock["start"]
        raw = {
            **totals,
            "seconds": round(elapsed, 2),
            "ops_per_s": (totals["grants"] + totals["releases"]) / elapsed,
            "claim_p50_ms": 1000 * (pct(claim_lat, 50) or 0),
            "claim_p99_ms": 1000 * (pct(claim_lat, 99) or 0),
            "release_p50_ms": 1000 * (pct(release_lat, 50) or 0),
            "release_p99_ms": 1000 * (pct(release_lat, 99) or 0),
            "cpu": cpu.result,
            "how": f"{len(agents)} psycopg connections (threads in this script), autocommit: {claim_sql}; then "
            f"{release_sql}",
        }
        say(
            f"  claims raw: {raw['ops_per_s']:.0f} grants+releases/s ({totals['refused'] / elapsed:.0f} refused/s), "
            f"claim p50 {raw['claim_p50_ms']:.2f} p99 {raw['claim_p99_ms']:.2f} ms, release p99 "
            f"{raw['release_p99_ms']:.2f} ms, releases that missed {totals['release_missed']}"
        )
        return raw

    # 3. upload -----------------------------------------------------------------------------------------
    def part_upload(self) -> None:
        size_mb, repeat = self.args.upload_mb, self.args.repeat
        say(f"part upload: {size_mb} MB, {repeat} times each, PUT via curl -T against cp + sync FILE")
        src = self.workdir / "big.bin"
        digest = hashlib.sha256()
        with open(src, "wb") as fh:
            for _ in range(size_mb):
                chunk = os.urandom(1024 * 1024)
                digest.update(chunk)
                fh.write(chunk)
            fh.flush()
            os.fsync(fh.fileno())
        expected = digest.hexdigest()
        size = src.stat().st_size
        session_id = f"bench-upload-{secrets.token_hex(3)}"
        session = api_ok(
            self.server.base_url, self.keys[0], "POST", "/api/v1/sessions/", {"id": session_id, "intent": "upload"}
        )
        session_id = session["id"]
        workspace_root = Path(self.env["WORKSPACE_ROOT"])
        copies = self.workdir / "copies"
        copies.mkdir()
        same_disk = src.stat().st_dev == copies.stat().st_dev == workspace_root.stat().st_dev
        tmp_disk = Path(tempfile.gettempdir()).stat().st_dev == src.stat().st_dev
        idle = self.wait_for_quiet("upload")
        self.recorder.start()
        url = f"{self.server.base_url}/api/v1/sessions/{session_id}/files/work_products/big.bin"
        ours: list[float] = []
        raw: list[float] = []
        answers = []

        def upload() -> None:
            out = self.workdir / "upload-answer.json"
            t0 = time.perf_counter()
            done = subprocess.run(
                [
                    "curl",
                    "-sS",
                    "-o",
                    str(out),
                    "-w",
                    "%{http_code}",
                    "-T",
                    str(src),
                    "-H",
                    "Expect:",
                    "-H",
                    f"Authorization: Bearer {self.keys[0]}",
                    "-H",
                    "Content-Type: application/octet-stream",
                    url,
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            elapsed = time.perf_counter() - t0
            status = done.stdout.strip()
            if status not in ("200", "201"):
                raise BenchError(f"PUT {url} answered {status}: {done.stderr} {out.read_text()[:500]}")
            body = json.loads(out.read_text())
            got = body.get("version", {}).get("sha256")
            if got != expected:
                raise BenchError(f"upload stored sha256 {got}, expected {expected}")
            answers.append({"status": int(status), "version": body["version"].get("number"), "sha256_ok": True})
            ours.append(elapsed)

        def copy(i: int) -> None:
            dst = copies / f"big-{i}.bin"
            t0 = time.perf_counter()
            subprocess.run(["cp", str(src), str(dst)], check=True)
            subprocess.run(["sync", str(dst)], check=True)  # fsync of that file (sync -f would be syncfs)
            raw.append(time.perf_counter() - t0)

        for i in range(repeat):
            for step in ("upload", "copy") if i % 2 == 0 else ("copy", "upload"):
                subprocess.run(["sync"], check=False)  # untimed: the last step's dirty pages don't land on this one
                upload() if step == "upload" else copy(i)
            say(
                f"  {i + 1}/{repeat}: ours {size / 1e6 / ours[-1]:.0f} MB/s ({ours[-1]:.2f} s), cp "
                f"{size / 1e6 / raw[-1]:.0f} MB/s ({raw[-1]:.2f} s)"
            )
        ours_mbs = size / 1e6 / statistics.median(ours)
        raw_mbs = size / 1e6 / statistics.median(raw)
        ratio = ours_mbs / raw_mbs
        stored = sorted(workspace_root.rglob("big.bin"))
        self.details["upload"] = {
            "bytes": size,
            "sha256": expected,
            "machine_busy_pct_before": idle,
            "ours_seconds": [round(x, 3) for x in ours],
            "cp_seconds": [round(x, 3) for x in raw],
            "ours_mb_per_s_median": ours_mbs,
            "cp_mb_per_s_median": raw_mbs,
            "ours_mb_per_s_best": size / 1e6 / min(ours),
            "cp_mb_per_s_best": size / 1e6 / min(raw),
            "answers": answers,
            "stored_files": [str(p) for p in stored],
            "same_disk": same_disk,
            "system_temp_on_same_disk": tmp_disk,
            "how": "ours: wall time of `curl -T big.bin` (streamed PUT) until the answer, which the server sends after "
            "fsync and rename; cp: wall time of `cp` then `sync FILE` (fsync of the copy). Untimed `sync` before each "
            "step. MB = 10^6 bytes.",
        }
        if not same_disk:
            say("  WARNING: the source, the copies and the workspace root are not on one filesystem")
        self.add_figure(
            name=f"upload {size_mb} MB (median of {repeat}), MB/s",
            ours=ours_mbs,
            ours_extra=f"best {size / 1e6 / min(ours):.0f}",
            raw=raw_mbs,
            raw_extra=f"cp+fsync, best {size / 1e6 / min(raw):.0f}",
            ratio=ratio,
            ratio_note="throughput ours/cp, higher is better",
            target=f"ratio >= {TARGETS['upload_ratio']}",
            passed=ratio >= TARGETS["upload_ratio"],
        )
        self.recorder.record("workspaces.upload", ours_mbs, raw=raw_mbs)

    # output ----------------------------------------------------------------------------------------------
    def table(self) -> str:
        header = ["figure", "ours", "", "raw", "", "ratio", "target", "result"]
        rows = [
            [
                f["name"],
                report.num(f["ours"]),
                f.get("ours_extra", ""),
                report.num(f["raw"]),
                f.get("raw_extra", ""),
                f"{f['ratio']:.2f}" if f.get("ratio") is not None else "-",
                f["target"],
                report.VERDICT[f["passed"]],
            ]
            for f in self.figures
        ]
        notes = sorted(
            {f"{f['name'].split(',')[0].split(' (')[0]}: {f['ratio_note']}" for f in self.figures if f["ratio_note"]}
        )
        return "\n".join([report.table(header, rows), "", "ratio: " + "; ".join(notes)])

    def write_json(self) -> Path:
        git = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip()
        return report.write_json(
            RESULTS_DIR / f"workspaces-{self.stamp}.json",
            {
                "timestamp": self.stamp,
                "machine": report.machine(self.details.get("postgres_version"), git=git),
                "server": self.server.kind if self.server else None,
                "settings": self.args.settings,
                "args": vars(self.args),
                "targets": TARGETS,
                "figures": self.figures,
                "details": self.details,
            },
        )

    def run(self) -> int:
        self.setup()
        self.start_server()
        for part in PARTS:
            if part in self.args.parts:
                getattr(self, f"part_{part}")()
        return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.loader_child:
        loader_child(args.loader_child)
        return 0
    os.chdir(ROOT)
    bench = WorkspacesBench(args)
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
