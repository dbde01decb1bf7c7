#!/usr/bin/env python
"""Client benchmark (issue 6): the Claude Code hook adapter's wall time per call, and the Python
client's batched event throughput beside the raw batch endpoint, on the foundation benchmark's
set-up (bench/run.py's Bench on bench/harness/: PostgreSQL, Redis, gunicorn with uvicorn workers).

One run: a fresh database, keys, the server, then
  batch   run.py's own batch figure: POST lists of 1,000 events, pre-encoded, from its load generator
  client  the same work through switchyard_client: EventBatcher(max_items=1000) in --batch-clients
          threads, one Client and session each, events added one by one (ids, timestamps, JSON made
          by the client), counted in the database over the window; aim >= 80 % of "batch"
  hook    `switchyard hook` spawned --hook-calls times with a recorded Claude Code mix (prompt, tool
          calls that succeed and fail, a subagent, compaction, notification, stop), as Claude Code runs it: a new process per event; p50/p95 wall time, aim
          p95 <= 50 ms; beside the floor of starting this venv's Python, and the hook with the server down;
          with --hook-baseline-src DIR, another client's source run call for call in turn with this one

Run: .venv/bin/python bench/client_bench.py [--duration 10] [--hook-calls 200]   (other options: run.py's)
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
import run as foundation  # noqa: E402 - bench/run.py, the foundation benchmark
from harness import RESULTS_DIR, ROOT, percentile, report, say  # noqa: E402
from harness.load import CpuMeter  # noqa: E402

from switchyard_client.api.batching import EventBatcher  # noqa: E402
from switchyard_client.api.client import Client  # noqa: E402

TARGET_RATIO = 0.8
TARGET_HOOK_P95_MS = 50.0
SWITCHYARD = Path(sys.executable).parent / "switchyard"


class ClientBench(foundation.Bench):
    def raw_batch_figure(self) -> float:
        self.part_batch()
        return self.figures[-1]["ours"]

    def part_client(self, raw_events_per_s: float) -> None:
        clients = self.args.batch_clients
        say(f"part client: EventBatcher(max_items=1000), {clients} threads, one session each")
        sessions = self.open_sessions("client", clients)
        ids = [sid for sid, _ in sessions]
        stop = threading.Event()
        errors: list[str] = []

        def worker(sid: str, key: str) -> None:
            try:
                with Client(self.server.base_url, key, timeout=120) as client:
                    batcher = EventBatcher(client, sid, max_items=1000, interval=None, register_atexit=False)
                    n = 0
                    while not stop.is_set():
                        batcher.event("log", {"line": f"client line {n}: compiling module {n % 97} of 97"})
                        n += 1
                    batcher.close()
                    if batcher.rejected:
                        errors.append(f"{len(batcher.rejected)} rejected")
            except Exception as exc:
                errors.append(repr(exc))

        def count() -> int:
            return self.pg.scalar("SELECT count(*) FROM sessions_app_streamevent WHERE session_id = ANY(%s)", [ids])

        self.wait_for_quiet("client")
        threads = [threading.Thread(target=worker, args=s, daemon=True) for s in sessions]
        for thread in threads:
            thread.start()
        time.sleep(self.args.warmup)
        before, started = count(), time.monotonic()
        with CpuMeter(self.server.worker_pids()) as cpu:
            time.sleep(self.args.duration)
        after, seconds = count(), time.monotonic() - started
        stop.set()
        for thread in threads:
            thread.join(timeout=120)
        events_per_s = (after - before) / seconds
        ratio = events_per_s / raw_events_per_s if raw_events_per_s else None
        say(
            f"  client: {events_per_s:.0f} events/s committed during the window "
            f"({ratio:.0%} of the raw batch figure); CPU {cpu.result}; errors {errors or 'none'}"
        )
        self.details["client"] = {"events_per_s": events_per_s, "ratio": ratio, "cpu": cpu.result, "errors": errors}
        self.add_figure(
            name=f"client: EventBatcher 1,000, {clients} threads",
            unit="events/s",
            ours=events_per_s,
            p50_ms=None,
            p99_ms=None,
            failed=len(errors),
            raw=raw_events_per_s,
            raw_what="run.py batch of 1,000 events/s",
            target=f">= {TARGET_RATIO:.0%} of raw",
            passed=bool(ratio and ratio >= TARGET_RATIO and not errors),
        )
        # The load from the start of the raw batch figure (its part_batch started the recorder).
        self.recorder.record(
            "client.throughput", events_per_s, raw=raw_events_per_s, conditions={"no client errors": not errors}
        )

    def part_hook(self) -> None:
        calls = self.args.hook_calls
        say(f"part hook: `switchyard hook` x {calls}, a new process each, recorded Claude Code payloads")
        state = self.workdir / "hook-state"
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.workdir),
            "SWITCHYARD_URL": self.server.base_url,
            "SWITCHYARD_KEY": self.keys[0],
            "SWITCHYARD_STATE_DIR": str(state),
        }
        sid = f"bench-hook-{uuid.uuid4()}"
        payloads = hook_payloads(sid, calls)

        def timed(cmd: list[str], payload: dict, environment: dict) -> tuple[float, subprocess.CompletedProcess]:
            started = time.perf_counter()
            done = subprocess.run(cmd, input=json.dumps(payload).encode(), env=environment, capture_output=True)
            return (time.perf_counter() - started) * 1000, done

        self.wait_for_quiet("hook")
        self.recorder.start()
        floor = [timed([sys.executable, "-c", "pass"], {}, env)[0] for _ in range(30)]
        # --hook-baseline-src: another client's source tree (e.g. `git archive <commit> client/src`)
        # run on PYTHONPATH, ahead of this venv's, call for call interleaved with this one, each in
        # its own session: an A/B on the same machine in the same minutes.
        baseline = self.args.hook_baseline_src
        base_env = {**env, "PYTHONPATH": baseline, "SWITCHYARD_STATE_DIR": f"{state}-baseline"}
        base_sid = f"bench-hook-baseline-{uuid.uuid4()}"
        base_payloads = hook_payloads(base_sid, calls) if baseline else []
        walls, noisy, base_walls, base_noisy = [], 0, [], 0
        for index, payload in enumerate(payloads):
            ms, done = timed([str(SWITCHYARD), "hook"], payload, env)
            walls.append(ms)
            noisy += bool(done.stderr)
            if baseline:
                ms, done = timed([str(SWITCHYARD), "hook"], base_payloads[index], base_env)
                base_walls.append(ms)
                base_noisy += bool(done.stderr)
        down_env = {**env, "SWITCHYARD_URL": "http://127.0.0.1:9", "SWITCHYARD_STATE_DIR": str(state) + "-down"}
        down = [timed([str(SWITCHYARD), "hook"], payloads[1], down_env)[0] for _ in range(30)]
        # The subagent's calls are in its child session (issue 15): counted with the main session's.
        rows = self.pg.scalar(
            "SELECT count(*) FROM ledger_toolinvocation WHERE session_id = %s"
            " OR session_id IN (SELECT id FROM sessions_app_agentsession WHERE parent_id = %s)",
            [sid, sid],
        )
        expected = sum(1 for payload in payloads if payload["hook_event_name"] == "PreToolUse")
        p50, p95 = statistics.median(walls), percentile(walls, 95)
        say(
            f"  hook: p50 {p50:.1f} ms, p95 {p95:.1f} ms, max {max(walls):.1f} ms over {calls} calls "
            f"({noisy} wrote to stderr); python start alone p50 {statistics.median(floor):.1f} ms; "
            f"server down p50 {statistics.median(down):.1f} ms; tool calls stored {rows} of {expected}"
        )
        self.details["hook"] = {
            "calls": calls,
            "p50_ms": p50,
            "p95_ms": p95,
            "max_ms": max(walls),
            "stderr_calls": noisy,
            "python_start_p50_ms": statistics.median(floor),
            "server_down_p50_ms": statistics.median(down),
            "server_down_p95_ms": percentile(down, 95),
            "tool_calls_stored": rows,
            "tool_calls_sent": expected,
        }
        if baseline:
            base_p50, base_p95 = statistics.median(base_walls), percentile(base_walls, 95)
            say(
                f"  baseline client ({baseline}), interleaved: p50 {base_p50:.1f} ms, p95 {base_p95:.1f} ms "
                f"({base_noisy} wrote to stderr); this client / baseline p50 {p50 / base_p50:.2f}, p95 {p95 / base_p95:.2f}"
            )
            self.details["hook_baseline"] = {
                "src": baseline,
                "p50_ms": base_p50,
                "p95_ms": base_p95,
                "max_ms": max(base_walls),
                "stderr_calls": base_noisy,
            }
        self.add_figure(
            name=f"hook: wall per call, {calls} calls",
            unit="ms (p50)",
            ours=p50,
            p50_ms=p50,
            p99_ms=None,
            failed=noisy,
            raw=statistics.median(floor),
            raw_what="python -c pass, p50 ms",
            target=f"p95 <= {TARGET_HOOK_P95_MS:g} ms (p95 {p95:.1f})",
            passed=p95 <= TARGET_HOOK_P95_MS and noisy == 0,
        )
        quiet = {"nothing written to stderr": noisy == 0}
        self.recorder.record("client.hook_p95", p95, raw=percentile(floor, 95), conditions=quiet)

    def run(self) -> int:
        self.check_services()
        self.setup_database()
        self.start_server()
        if "hook" in self.args.client_parts:
            self.part_hook()
        if "client" in self.args.client_parts:
            self.part_client(self.raw_batch_figure())
        return 0


def hook_payloads(sid: str, calls: int) -> list[dict]:
    """SessionStart, then rounds of the events a working session sends (issue 15's larger set): a
    prompt, tool calls that succeed and fail, a subagent with a call of its own, a notification,
    a compaction with its summary, the end of the turn."""
    common = {"session_id": sid, "transcript_path": f"/tmp/{sid}.jsonl", "cwd": "/srv/app"}
    payloads = [{**common, "hook_event_name": "SessionStart", "source": "startup", "model": "claude-sonnet-4-5"}]
    n = 0
    while len(payloads) < calls:
        n += 1
        bash = {"tool_name": "Bash", "tool_input": {"command": f"pytest -q tests/test_{n}.py"}}
        read = {"tool_name": "Read", "tool_input": {"file_path": f"/srv/app/src/module_{n}.py"}}
        sub = {"agent_id": f"a{n:015x}", "agent_type": "Explore"}
        grep = {"tool_name": "Grep", "tool_input": {"pattern": f"def test_{n}"}, "tool_use_id": f"toolu_g{n}"}
        payloads += [
            {**common, "hook_event_name": "UserPromptSubmit", "prompt": f"Fix test {n}"},
            {**common, "hook_event_name": "PreToolUse", **bash, "tool_use_id": f"toolu_b{n}"},
            {
                **common,
                "hook_event_name": "PostToolUse",
                **bash,
                "tool_use_id": f"toolu_b{n}",
                "tool_response": {"stdout": f"{n} passed", "stderr": "", "interrupted": False, "isImage": False},
            },
            {**common, "hook_event_name": "PreToolUse", **read, "tool_use_id": f"toolu_r{n}"},
            {
                **common,
                "hook_event_name": "PostToolUseFailure",
                **read,
                "tool_use_id": f"toolu_r{n}",
                "error": "File does not exist.",
                "is_interrupt": False,
                "duration_ms": 3,
            },
            {**common, "hook_event_name": "SubagentStart", **sub},
            {**common, "hook_event_name": "PreToolUse", **grep, **sub},
            {**common, "hook_event_name": "PostToolUse", **grep, **sub, "tool_response": {"numFiles": 1}},
            {**common, "hook_event_name": "SubagentStop", **sub, "stop_hook_active": False},
            {**common, "hook_event_name": "Notification", "message": "Claude needs your attention"},
            {**common, "hook_event_name": "PreCompact", "trigger": "auto", "custom_instructions": ""},
            {**common, "hook_event_name": "PostCompact", "trigger": "auto", "compact_summary": f"Fixed tests 1-{n}."},
            {**common, "hook_event_name": "Stop", "stop_hook_active": False},
        ]
    return payloads[:calls]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    own = {"--hook-calls": "200", "--client-parts": "hook,client", "--hook-baseline-src": ""}
    if {"-h", "--help"} & set(argv):
        print(__doc__)
        print(
            "Its own options: --hook-calls N (default 200), --client-parts hook,client,\n"
            "  --hook-baseline-src DIR (another client's src/, run interleaved with this one: an A/B);\n"
            "all others are run.py's:\n"
        )
    rest = []
    i = 0
    while i < len(argv):
        if argv[i] in own:
            own[argv[i]] = argv[i + 1]
            i += 2
        else:
            rest.append(argv[i])
            i += 1
    # Its own database and Redis db, so it can run while someone else runs bench/run.py.
    defaults = ["--db", "switchyard_bench_client", "--redis-url", "redis://127.0.0.1:6379/13"]
    args = foundation.parse_args(["--parts", "batch", "--batch-sizes", "1000", "--no-raw", *defaults, *rest])
    args.hook_calls = int(own["--hook-calls"])
    args.client_parts = own["--client-parts"].split(",")
    args.hook_baseline_src = str(Path(own["--hook-baseline-src"]).resolve()) if own["--hook-baseline-src"] else ""
    os.chdir(ROOT)
    bench = ClientBench(args)
    code = report.run_guarded(bench)
    if bench.figures:
        print()
        print(bench.table())
        out = report.write_json(
            RESULTS_DIR / f"{bench.stamp}-client.json", {"figures": bench.figures, "details": bench.details}
        )
        report.written(out)
    print(bench.recorder.note())
    return code


if __name__ == "__main__":
    sys.exit(main())
