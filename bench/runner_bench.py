#!/usr/bin/env python
"""Runner benchmark (issue 13): one real `switchyard runner` process against a production-style server
(bench/run.py's set-up, whose helpers it imports: PostgreSQL database switchyard_bench_runner recreated,
Redis db 13 flushed, gunicorn with uvicorn workers), each figure beside its raw baseline in the same run.

  dispatch  a run queued (POST /api/v1/tasks/{id}/runs/ with an orchestrate key; the clock read just
            before the request) -> the agent process started (its first act: `date +%s.%N`, read back
            from the runner's job log). --dispatch-runs runs one at a time, each after the previous one
            ended (an idle runner). p50/p95; aim p95 <= 1 s, p50 <= 250 ms.
            Raw: the same `sh -c 'date +%s.%N; ...'` started by subprocess.Popen, spawn -> first line.
  cancel    a run asked to stop (POST /api/v1/runs/{id}/cancel/ with the orchestrate key; the clock read just
            before the request) -> the agent's TERM handler (it prints `stopped <time.time()>`, read back from the
            runner's job log), on a running run of an agent that waits; --cancel-runs one at a time on the
            idle runner, each seen to end `cancelled`. p50/p95; aim p95 <= 1 s (issue 13: the runner learns
            of a cancel within a second). Raw: the same agent started by Popen in a session of its own,
            killpg(SIGTERM) -> its handler's line.
  follow_up request changes (POST /api/v1/tasks/{id}/review/ {"decision": "request_changes"} with the
            orchestrate key, the clock read just before) -> the continuing run's agent started (its
            `date +%s.%N`), on a task whose first run just ended on the idle runner, in a worktree of a
            repository on the server's machine; the provider has a resume_command, which the runner
            starts (the same session continued). --follow-up-runs of them; aim p95 <= 1 s (issue 25).
  scale     --scale-runs concurrent `sleep` runs on the runner (capacity = that many); once all are
            running, over --scale-window seconds: the runner process's CPU (utime+stime of
            /proc/<pid>/stat, children excluded) per run-second and in total, and its VmRSS and PSS
            (smaps_rollup). Aim: under 2 % of a core and 30 MB at 100 runs.
            Raw: a minimal Python process that Popens as many sleeps and waits for them.
  logs      throughput: a provider that `cat`s a pre-generated --log-mb MiB text file; from the agent's
            start (its `date` line) until the server's copy (the session log under LOGS_ROOT) holds it
            all; aim >= 0.5 of `cat` of the same file into a file on the same disk + fsync.
            latency: a provider printing `tick <n> <date +%s.%N>` every 50 ms for --tick-seconds while
            the bench polls GET /api/v1/sessions/{id}/log/?offset= every --poll-ms; line written ->
            seen in the API, p50/p95 (the poll interval is part of it); aim p95 <= 1 s.

  waiting   a run that waits for a person holds no process (issue 26 §2): --waiting-runs runs of a stand-in
            for Claude Code (bench/deferring_agent.py: records an Allow / Deny question, prints the result
            line of a deferred tool call, exits 0) until every one is `waiting`; then no agent process of
            theirs is left (counted from /proc), and over --scale-window seconds the runner's CPU and its
            VmRSS/PSS, beside the same runner idle before they were queued (aim: RSS < 30 MB). Then, one at
            a time on the idle runner, --resume-runs of them answered Allow (POST /api/v1/runs/{id}/answer/,
            the clock read just before) -> the resumed agent's "tool" line (its `time.time()`), p50/p95;
            aim p95 <= 2 s. The real CLI's own start comes on top: tests/runners/test_runner_claude_deferred.py.

  sandbox   what the sandbox (bubblewrap) costs, interleaved: the dispatch figure's agent run sandboxed and
            with `sandbox = false`, alternately, --sandbox-runs each (p50/p95; aim: +50 ms at p95 at
            most), and a tool-heavy run (300 tool-like processes: `git --version`, `ls`, a file written
            and read) sandboxed and not, 5 each alternately, its wall time from its first to its last
            line (aim <= 1.05x). Needs bwrap; the runner is configured `sandbox = "if-available"`.

Console: progress lines; at the end a table, and bench/results/<ts>-runner.json beside the server log
and the runner's console (<ts>-runner.log).

Run: .venv/bin/python bench/runner_bench.py [--quick] [--parts dispatch,scale,logs]
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import hashlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
import httpx  # noqa: E402 - a dependency of switchyard_client
import run as foundation  # noqa: E402 - bench/run.py, the foundation benchmark
from harness import percentile, report  # noqa: E402 - bench/harness: set-up, server, table

say = foundation.say
PARTS = ("dispatch", "cancel", "follow_up", "scale", "logs", "sandbox", "waiting")
TERMINAL = {"succeeded", "failed", "cancelled", "lost"}
AIMS = {
    "dispatch_p50_ms": 250.0,
    "dispatch_p95_ms": 1000.0,
    "follow_up_p95_ms": 1000.0,
    "scale_cpu_pct_per_run": 2.0,  # "CPU per run-second": per run; the total is printed beside it
    "scale_rss_mb": 30.0,
    "log_ratio": 0.5,
    "log_line_p95_ms": 1000.0,
    "waiting_rss_mb": 30.0,
    "resume_p95_ms": 2000.0,
    "cancel_p95_ms": 1000.0,
}
SWITCHYARD = Path(sys.executable).parent / "switchyard"
CLK_TCK = os.sysconf("SC_CLK_TCK")
TICK_PERIOD = 0.05
# A tool-heavy agent: 300 short processes as tool calls start them, between two clock lines.
TOOL_HEAVY = (
    "date +%s.%N; i=0; while [ $i -lt 100 ]; do git --version >/dev/null; ls -la >/dev/null; "
    "echo $i > tool-$i.txt && cat tool-$i.txt >/dev/null; i=$((i+1)); done; date +%s.%N"
)
# An agent that works until it is stopped, and says when its TERM arrived: one process, its handler set
# before its first line. (A shell's `sleep 600 & wait` raced: a TERM landing while the shell forked the
# sleep left the sleep running, holding the output open.)
STOPPABLE = (
    "import signal, sys, time\n"
    "def stop(*_):\n"
    "    print('stopped', time.time(), flush=True)\n"
    "    sys.exit(143)\n"
    "signal.signal(signal.SIGTERM, stop)\n"
    "print(time.time(), flush=True)\n"
    "while True:\n"
    "    signal.pause()\n"
)
# A provider's resume: what a run continuing an earlier one starts (the follow_up part).
RESUME_COMMANDS = {"resumable": ["sh", "-c", "date +%s.%N; echo resumed"]}
FOLLOW_UP_REPO = """
import subprocess, sys
from board.models import Task
from workspaces.worktrees.services import repository_register
path, ids = sys.argv[1], [int(i) for i in sys.argv[2].split(",")]
repository, _ = repository_register(path=path)
Task.objects.filter(pk__in=ids).update(repository=repository)
print(repository.pk)
"""
MAX_READ = 1024 * 1024  # the log API's largest chunk
STAFF_SESSION = """
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from importlib import import_module
User = get_user_model()
user = User.objects.filter(username="bench-staff").first() or User.objects.create_superuser(
    "bench-staff", "bench@example.invalid", None)
store = import_module(settings.SESSION_ENGINE).SessionStore()
store[SESSION_KEY] = str(user.pk)
store[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
store[HASH_SESSION_KEY] = user.get_session_auth_hash()
store.create()
print(f"{settings.SESSION_COOKIE_NAME}={store.session_key}")
"""


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process (all its threads), without its children's."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def memory_mb(pid: int) -> dict[str, float]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmRSS:", "VmHWM:", "Threads:")):
            name, value = line.split(":", 1)
            out[name] = float(value.split()[0]) / (1024 if name != "Threads" else 1)
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                out["Pss"] = float(line.split()[1]) / 1024
    return out


def first_stamp(path: Path) -> float | None:
    """The `date +%s.%N` on the first line of a log, once the line is complete."""
    try:
        with open(path, "rb") as fh:
            line = fh.readline()
    except OSError:
        return None
    if not line.endswith(b"\n"):
        return None
    try:
        return float(line.split()[0])
    except (ValueError, IndexError):
        return None


class RunnerBench(foundation.Bench):
    # --- set-up ---------------------------------------------------------------------------------------------
    def setup_runner_world(self) -> None:
        a = self.args
        out = self.manage("create_runner_key", "bench-runner", "--capacity", str(a.scale_runs))
        self.runner_key = out.strip().splitlines()[-1].strip()
        tasks = a.dispatch_runs + a.follow_up_runs + a.scale_runs + a.log_rounds + a.waiting_runs + 2
        say(f"creating {tasks} ready tasks (one through the API, cloned in SQL as run.py does)")
        self.create_ready_tasks(tasks)
        self.tasks = [
            r[0] for r in self.pg.control().execute("SELECT id FROM board_task WHERE status = 'ready' ORDER BY id")
        ]
        self.http = httpx.Client(
            base_url=self.server.base_url + "/api/v1/", headers={"Authorization": f"Bearer {self.keys[0]}"}, timeout=30
        )
        # Reading another agent's session log takes a person (staff), as on the session page: a
        # logged-in Django session for a superuser, made in one manage.py shell.
        cookie = self.manage("shell", "-c", STAFF_SESSION).strip().splitlines()[-1]
        self.staff = httpx.Client(base_url=self.server.base_url + "/api/v1/", headers={"Cookie": cookie}, timeout=30)
        self.big = self.workdir / "big.txt"
        if "logs" in a.parts:
            self.make_big_file(a.log_mb * 1024 * 1024)
        self.start_runner()

    def make_big_file(self, size: int) -> None:
        line = b"".join(
            f"{i:08d} the quick brown fox compiles module {i % 97:02d} of 97 and ships its log\n".encode()
            for i in range(1000)
        )
        with open(self.big, "wb") as fh:
            left = size
            while left > 0:
                fh.write(line[:left])
                left -= len(line[:left])
        say(f"generated {self.big} ({size / 2**20:.0f} MiB of text lines)")

    def providers(self) -> dict[str, list[str]]:
        ticks = max(1, round(self.args.tick_seconds / (TICK_PERIOD + 0.004)))
        return {
            "dispatch": ["sh", "-c", "date +%s.%N; echo dispatched"],
            "stoppable": [sys.executable, "-c", STOPPABLE],
            "resumable": ["sh", "-c", "date +%s.%N; echo first"],
            "sleeper": ["sleep", str(self.scale_sleep)],
            "bigcat": ["sh", "-c", f"date +%s.%N; cat {self.big}"],
            "tools": ["sh", "-c", TOOL_HEAVY],
            "ticker": [
                "sh",
                "-c",
                f"date +%s.%N; i=0; while [ $i -lt {ticks} ]; do echo tick $i $(date +%s.%N); "
                f"i=$((i+1)); sleep {TICK_PERIOD}; done",
            ],
        }

    def start_runner(self) -> None:
        a = self.args
        self.scale_sleep = int(a.scale_window + 600)  # cancelled once measured
        self.runner_root = self.workdir / "runner"
        lines = [
            "[runner]",
            f'url = "{self.server.base_url}"',
            f'key = "{self.runner_key}"',
            'name = "bench-runner"',
            f"capacity = {a.scale_runs}",
            'root = "runner"',
            "grace_seconds = 2",
        ]
        lines.append('sandbox = "if-available"')
        for name, argv in self.providers().items():
            lines += ["", f"[providers.{name}]", f"command = {json.dumps(argv)}", 'output = "text"']
            if name in RESUME_COMMANDS:
                lines.append(f"resume_command = {json.dumps(RESUME_COMMANDS[name])}")
            # The same agents unsandboxed, for the sandbox part's interleaved A/B.
            lines += ["", f"[providers.{name}-plain]", f"command = {json.dumps(argv)}", 'output = "text"']
            lines.append("sandbox = false")
        # A stand-in for Claude Code whose hook defers (part waiting): Switchyard's hooks, so the runner
        # looks for the deferred call in its result and passes the answer on when it resumes it.
        deferring = [sys.executable, str(BENCH_DIR / "deferring_agent.py")]
        lines += ["", "[providers.deferring]", f"command = {json.dumps(deferring)}", 'output = "text"']
        lines += [f"resume_command = {json.dumps(deferring)}", "hooks = true", "memory_mb = 1"]
        # The built-ins stay offered if present; they are never asked for here.
        self.runner_toml = self.workdir / "switchyard-runner.toml"
        self.runner_toml.write_text("\n".join(lines) + "\n")
        self.runner_log = foundation.RESULTS_DIR / f"{self.stamp}-runner.log"
        cmd = [a.runner_bin or str(SWITCHYARD), "runner", "--config", str(self.runner_toml)]
        if a.runner_whatif:
            cmd = [sys.executable, str(BENCH_DIR / "runner_whatif.py"), a.runner_whatif, *cmd[2:]]
        say(f"starting the runner: {' '.join(cmd)} (console: {self.runner_log.relative_to(foundation.ROOT)})")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SWITCHYARD_", "DJANGO_", "DATABASE_"))}
        env["PYTHONUNBUFFERED"] = "1"
        if a.runner_pythonpath:  # another copy of switchyard_client (an A/B against a saved one)
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [a.runner_pythonpath, env.get("PYTHONPATH")]))
            say(f"  the runner imports switchyard_client from {a.runner_pythonpath}")
        with open(self.runner_log, "ab") as log:
            self.runner = subprocess.Popen(
                cmd, cwd=self.workdir, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.runner.poll() is not None:
                raise foundation.BenchError(f"the runner exited with {self.runner.returncode}: {self.runner_tail()}")
            online = self.pg.scalar("SELECT status FROM runners_runner WHERE name = 'bench-runner'")
            if online == "online":
                break
            time.sleep(0.2)
        else:
            raise foundation.BenchError(f"the runner did not come online in 30 s: {self.runner_tail()}")
        time.sleep(1.0)  # its poll thread is in its long poll by now
        say(f"runner online (pid {self.runner.pid}); RSS at rest {memory_mb(self.runner.pid)}")
        self.details["runner_at_rest"] = memory_mb(self.runner.pid)

    def runner_tail(self, n: int = 20) -> str:
        try:
            return "\n".join(self.runner_log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def stop_runner(self) -> None:
        proc = getattr(self, "runner", None)
        if proc is None:
            return
        if proc.poll() is None:
            say("stopping the runner")
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)
        # Agents it left running (on_exit=leave): their process groups, from its state files.
        for state in glob.glob(str(self.runner_root / "runs" / "*.json")):
            with contextlib.suppress(Exception):
                pid = json.loads(Path(state).read_text()).get("pid")
                if pid:
                    os.killpg(int(pid), signal.SIGKILL)

    def cleanup(self) -> None:
        self.stop_runner()
        for client in (getattr(self, "http", None), getattr(self, "staff", None)):
            if client is not None:
                client.close()
        super().cleanup()

    # --- helpers ----------------------------------------------------------------------------------------------
    def next_task(self) -> int:
        return self.tasks.pop(0)

    def queue(self, provider: str) -> tuple[int, float]:
        task = self.next_task()
        t0 = time.time()
        r = self.http.post(f"tasks/{task}/runs/", json={"provider": provider, "prompt": f"bench {provider}"})
        if r.status_code != 201:
            raise foundation.BenchError(f"queueing a run answered {r.status_code}: {r.text[:300]}")
        return r.json()["id"], t0

    def run_get(self, run_id: int) -> dict:
        r = self.http.get(f"runs/{run_id}/")
        r.raise_for_status()
        return r.json()

    def job_log(self, run_id: int, timeout: float = 30) -> Path:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = glob.glob(str(self.runner_root / "running-jobs" / f"job-*-{run_id}.log"))
            if found:
                return Path(found[0])
            time.sleep(0.002)
        raise foundation.BenchError(f"run {run_id}: no job log after {timeout:g} s; runner says:\n{self.runner_tail()}")

    def wait_stamp(self, path: Path, timeout: float = 30) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            stamp = first_stamp(path)
            if stamp is not None:
                return stamp
            time.sleep(0.002)
        raise foundation.BenchError(f"{path}: no first line in {timeout:g} s")

    def wait_end(self, run_id: int, timeout: float = 60, poll: float = 0.05) -> dict:
        """The run's final status, and its state file gone (the runner's thread for it is done)."""
        deadline = time.monotonic() + timeout
        state = self.runner_root / "runs" / f"{run_id}.json"
        while time.monotonic() < deadline:
            run = self.run_get(run_id)
            if run["status"] in TERMINAL and not state.exists():
                return run
            time.sleep(poll)
        raise foundation.BenchError(f"run {run_id} did not end in {timeout:g} s; runner says:\n{self.runner_tail()}")

    def session_of(self, run_id: int, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            session = self.run_get(run_id)["session"]
            if session:
                return session
            time.sleep(0.01)
        raise foundation.BenchError(f"run {run_id} has no session after {timeout:g} s")

    def server_log_file(self, session: str) -> Path:
        folder = session if session.startswith("session-") else f"session-{session}"
        found = glob.glob(str(self.workdir / "var" / "logs" / "**" / folder / "*.log"), recursive=True)
        if found:
            return Path(found[0])
        base = self.workdir / "var" / "logs" / "orchestrator-sessions" / folder
        return base / "bigcat-at-bench-runner.log"

    # --- dispatch -------------------------------------------------------------------------------------------
    def part_dispatch(self) -> None:
        n = self.args.dispatch_runs
        say(f"part dispatch: {n} runs, one at a time on an idle runner; raw: Popen of the same command")
        self.recorder.start()
        argv = self.providers()["dispatch"]
        raw = []
        for _ in range(n):
            t0 = time.time()
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE)
            line = proc.stdout.readline()
            raw.append((float(line.split()[0]) - t0) * 1000)
            proc.communicate()
        self.wait_for_quiet("dispatch")
        ours, failures, marks = [], 0, []
        for i in range(n):
            run_id, t0 = self.queue("dispatch")
            stamp = self.wait_stamp(self.job_log(run_id))
            ours.append((stamp - t0) * 1000)
            marks.append((run_id, t0, stamp))
            end = self.wait_end(run_id)
            failures += end["status"] != "succeeded"
            if (i + 1) % max(1, n // 10) == 0:
                say(
                    f"  {i + 1}/{n}: last {ours[-1]:.0f} ms, p50 so far {statistics.median(ours):.0f} ms, "
                    f"not succeeded {failures}"
                )
            time.sleep(0.05)  # the runner's thread for it has just reported; let it go back to idle
        p50, p95 = statistics.median(ours), percentile(ours, 95)
        r50, r95 = statistics.median(raw), percentile(raw, 95)
        say(
            f"  dispatch: p50 {p50:.0f} ms, p95 {p95:.0f} ms, max {max(ours):.0f} ms; raw Popen p50 {r50:.1f} ms, "
            f"p95 {r95:.1f} ms; ratio p50 {p50 / r50:.0f}x; runs not succeeded {failures}"
        )
        split = self.dispatch_split(marks)
        say(
            f"  where it goes (medians): queued -> its session opened by the `starting` report "
            f"{split['to_session_ms']:.0f} ms; session opened -> agent started {split['session_to_agent_ms']:.0f} ms"
        )
        self.details["dispatch"] = {
            "split": split,
            "runs": n,
            "ms": ours,
            "p50_ms": p50,
            "p95_ms": p95,
            "max_ms": max(ours),
            "raw_p50_ms": r50,
            "raw_p95_ms": r95,
            "raw_ms": raw,
            "not_succeeded": failures,
        }
        self.add_figure(
            name=f"dispatch: queued -> agent started, {n} runs",
            unit="ms (p50)",
            ours=p50,
            p50_ms=p50,
            p99_ms=None,
            failed=failures,
            raw=r50,
            raw_what="Popen spawn -> first line, p50 ms",
            target=f"p50 <= 250, p95 <= 1000 ms (p95 {p95:.0f}, raw p95 {r95:.1f})",
            passed=p50 <= AIMS["dispatch_p50_ms"] and p95 <= AIMS["dispatch_p95_ms"] and failures == 0,
        )
        succeeded = {"every run succeeded": failures == 0}
        self.recorder.record("runner.dispatch_p50", p50, raw=r50, conditions=succeeded)
        self.recorder.record("runner.dispatch_p95", p95, raw=r95, conditions=succeeded)

    # --- cancel ---------------------------------------------------------------------------------------------
    def stopped_stamp(self, path: Path, timeout: float = 30) -> float:
        """The time on the agent's `stopped <date>` line, once it is in the job log."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with open(path, "rb") as fh:
                for line in fh:
                    if line.startswith(b"stopped ") and line.endswith(b"\n"):
                        return float(line.split()[1])
            time.sleep(0.002)
        raise foundation.BenchError(f"{path}: no `stopped` line in {timeout:g} s; runner says:\n{self.runner_tail()}")

    def wait_status(self, run_id: int, status: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.run_get(run_id)["status"] == status:
                return
            time.sleep(0.01)
        raise foundation.BenchError(f"run {run_id} not {status} in {timeout:g} s; runner says:\n{self.runner_tail()}")

    def part_cancel(self) -> None:
        n = self.args.cancel_runs
        say(f"part cancel: {n} running runs asked to stop, one at a time; raw: killpg(SIGTERM) of the same agent")
        self.recorder.start()
        argv = self.providers()["stoppable"]
        raw = []
        for _ in range(n):
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, start_new_session=True)
            proc.stdout.readline()  # started, its trap set
            t0 = time.time()
            os.killpg(proc.pid, signal.SIGTERM)
            line = proc.stdout.readline()
            raw.append((float(line.split()[1]) - t0) * 1000)
            proc.communicate(timeout=10)
        self.wait_for_quiet("cancel")
        ours, failures = [], 0
        for i in range(n):
            run_id, _ = self.queue("stoppable")
            log = self.job_log(run_id)
            self.wait_stamp(log)
            self.wait_status(run_id, "running")
            t0 = time.time()
            r = self.http.post(f"runs/{run_id}/cancel/")
            if r.status_code not in (200, 202):
                raise foundation.BenchError(f"cancel of run {run_id} answered {r.status_code}: {r.text[:300]}")
            ours.append((self.stopped_stamp(log) - t0) * 1000)
            failures += self.wait_end(run_id)["status"] != "cancelled"
            if (i + 1) % max(1, n // 5) == 0:
                say(f"  {i + 1}/{n}: last {ours[-1]:.0f} ms, p50 so far {statistics.median(ours):.0f} ms")
            time.sleep(0.05)  # the runner's thread for it has just reported; let it go back to idle
        p50, p95 = statistics.median(ours), percentile(ours, 95)
        r50, r95 = statistics.median(raw), percentile(raw, 95)
        say(
            f"  cancel: p50 {p50:.0f} ms, p95 {p95:.0f} ms, max {max(ours):.0f} ms; raw killpg p50 {r50:.1f} ms, "
            f"p95 {r95:.1f} ms; runs not ended cancelled {failures}"
        )
        self.details["cancel"] = {"runs": n, "ms": ours, "raw_ms": raw, "not_cancelled": failures}
        self.add_figure(
            name=f"cancel: stop asked -> the agent's TERM, {n} runs",
            unit="ms (p95)",
            ours=p95,
            p50_ms=p50,
            p99_ms=None,
            failed=failures,
            raw=r95,
            raw_what="killpg(SIGTERM) -> the handler's line, p95 ms",
            target=f"p95 <= 1000 ms (p50 {p50:.0f}, raw p50 {r50:.1f})",
            passed=p95 <= AIMS["cancel_p95_ms"] and failures == 0,
        )
        self.recorder.record("runner.cancel_p95", p95, raw=r95, conditions={"every run ended cancelled": failures == 0})

    def part_sandbox(self) -> None:
        n = self.args.sandbox_runs
        if shutil.which("bwrap") is None:
            say("part sandbox: skipped, bwrap (bubblewrap) is not installed")
            return
        say(f"part sandbox: {n} dispatches sandboxed and {n} not, alternately; then 5 tool-heavy runs of each")
        self.recorder.start()
        times: dict[str, list[float]] = {"dispatch": [], "dispatch-plain": []}
        for i in range(n):
            for provider in ("dispatch", "dispatch-plain") if i % 2 == 0 else ("dispatch-plain", "dispatch"):
                run_id, t0 = self.queue(provider)
                times[provider].append((self.wait_stamp(self.job_log(run_id)) - t0) * 1000)
                end = self.wait_end(run_id)
                if end["status"] != "succeeded":
                    raise foundation.BenchError(f"{provider} run {run_id} {end['status']}: {self.runner_tail()}")
                time.sleep(0.05)
        boxed, plain = times["dispatch"], times["dispatch-plain"]
        b50, b95, p50, p95 = (
            statistics.median(boxed),
            percentile(boxed, 95),
            statistics.median(plain),
            percentile(plain, 95),
        )
        say(f"  dispatch sandboxed p50 {b50:.0f} ms p95 {b95:.0f} ms; unsandboxed p50 {p50:.0f} ms p95 {p95:.0f} ms")
        walls: dict[str, list[float]] = {"tools": [], "tools-plain": []}
        for i in range(5):
            for provider in ("tools", "tools-plain") if i % 2 == 0 else ("tools-plain", "tools"):
                run_id, _ = self.queue(provider)
                log = self.job_log(run_id)
                end = self.wait_end(run_id, timeout=120)
                if end["status"] != "succeeded":
                    raise foundation.BenchError(f"{provider} run {run_id} {end['status']}: {self.runner_tail()}")
                stamps = [float(x) for x in log.read_text().split() if x.replace(".", "", 1).isdigit()]
                walls[provider].append(stamps[-1] - stamps[0])
        wb, wp = statistics.median(walls["tools"]), statistics.median(walls["tools-plain"])
        say(f"  tool-heavy run: sandboxed {wb:.2f} s, unsandboxed {wp:.2f} s (medians of 5): {wb / wp:.3f}x")
        self.details["sandbox"] = {"dispatch_ms": times, "tool_heavy_s": walls}
        self.recorder.record("runner.sandbox_dispatch_added_p95", b95 - p95)
        self.recorder.record("runner.sandbox_tool_heavy", wb, raw=wp)
        self.add_figure(
            name=f"sandbox: dispatch p95, {n} runs each, interleaved",
            unit="ms (p95)",
            ours=b95,
            p50_ms=b50,
            p99_ms=None,
            failed=0,
            raw=p95,
            raw_what="the same runs unsandboxed, p95 ms",
            target=f"<= +50 ms at p95 (+{b95 - p95:.0f}; p50 {b50:.0f} vs {p50:.0f})",
            passed=b95 - p95 <= 50,
        )
        self.add_figure(
            name="sandbox: tool-heavy run wall time, 5 each, interleaved",
            unit="s (median)",
            ours=wb,
            p50_ms=None,
            p99_ms=None,
            failed=0,
            raw=wp,
            raw_what="the same run unsandboxed, s",
            target=f"<= 1.05x ({wb / wp:.3f}x)",
            passed=wb / wp <= 1.05,
        )

    def dispatch_split(self, marks: list[tuple[int, float, float]]) -> dict:
        """The server's side of each dispatch: when the `starting` report opened the run's session
        (the runner had the run by then), between the queue request and the agent's first line."""
        rows = dict(
            self.pg.control().execute(
                "SELECT r.id, extract(epoch FROM s.created_at)::float8 FROM runners_run r "
                "JOIN sessions_app_agentsession s ON s.id = r.session_id WHERE r.id = ANY(%s)",
                [[m[0] for m in marks]],
            )
        )
        first = [(rows[r] - t0) * 1000 for r, t0, _ in marks if r in rows]
        second = [(stamp - rows[r]) * 1000 for r, _, stamp in marks if r in rows]
        return {
            "to_session_ms": statistics.median(first) if first else None,
            "to_session_p95_ms": percentile(first, 95) if first else None,
            "session_to_agent_ms": statistics.median(second) if second else None,
            "session_to_agent_p95_ms": percentile(second, 95) if second else None,
        }

    # --- follow-up (issue 25) -----------------------------------------------------------------------------
    def follow_up_repository(self, tasks: list[int]) -> None:
        """A git clone on this machine (the server's), the tasks' repository: their runs work in worktrees."""
        clone = self.workdir / "follow-up-repo"
        clone.mkdir(exist_ok=True)
        env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@e", "GIT_COMMITTER_NAME": "b"}
        env["GIT_COMMITTER_EMAIL"] = "b@e"
        for argv in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "start"]):
            subprocess.run(["git", *argv], cwd=clone, env=env, check=True)
        # manage.py shell -c has no argv of its own: the script reads sys.argv after its own name.
        code = FOLLOW_UP_REPO.replace(
            "sys.argv[1], [int(i) for i in sys.argv[2]",
            f"{str(clone)!r}, [int(i) for i in {','.join(map(str, tasks))!r}",
        )
        self.manage("shell", "-c", code)

    def part_follow_up(self) -> None:
        n = self.args.follow_up_runs
        say(f"part follow_up: {n} requests for changes, each after its task's first run ended (an idle runner)")
        tasks = [self.next_task() for _ in range(n)]
        self.follow_up_repository(tasks)
        self.wait_for_quiet("follow_up")
        ours, answered, failures, resumed = [], [], 0, 0
        for i, task in enumerate(tasks):
            r = self.http.post(f"tasks/{task}/runs/", json={"provider": "resumable", "prompt": "bench: first"})
            if r.status_code != 201:
                raise foundation.BenchError(f"queueing a run answered {r.status_code}: {r.text[:300]}")
            if self.wait_end(r.json()["id"])["status"] != "succeeded":
                raise foundation.BenchError(f"task {task}'s first run failed; runner says:\n{self.runner_tail()}")
            time.sleep(0.05)  # as dispatch: the runner's thread for it goes back to idle
            t0 = time.time()
            body = {"decision": "request_changes", "message": "bench: change it"}
            r = self.http.post(f"tasks/{task}/review/", json=body)
            if r.status_code != 201:
                raise foundation.BenchError(f"request changes answered {r.status_code}: {r.text[:300]}")
            answered.append(r.elapsed.total_seconds() * 1000)
            run_id = r.json()["run"]["id"]
            log = self.job_log(run_id)
            ours.append((self.wait_stamp(log) - t0) * 1000)
            failures += self.wait_end(run_id)["status"] != "succeeded"
            resumed += "resumed" in log.read_text(errors="replace")
            if (i + 1) % max(1, n // 5) == 0:
                say(f"  {i + 1}/{n}: last {ours[-1]:.0f} ms, p50 so far {statistics.median(ours):.0f} ms")
        p50, p95 = statistics.median(ours), percentile(ours, 95)
        say(
            f"  follow_up: p50 {p50:.0f} ms, p95 {p95:.0f} ms, max {max(ours):.0f} ms; resume_command started "
            f"{resumed}/{n}; runs not succeeded {failures}; the review request itself p50 "
            f"{statistics.median(answered):.0f} ms"
        )
        self.details["follow_up"] = {
            "runs": n,
            "ms": ours,
            "p50_ms": p50,
            "p95_ms": p95,
            "resumed": resumed,
            "review_request_ms": answered,
        }
        self.add_figure(
            name=f"request changes -> continuing agent started, {n} runs",
            unit="ms (p95)",
            ours=p95,
            p50_ms=p50,
            p99_ms=None,
            failed=failures,
            raw=None,
            raw_what="",
            target=f"p95 <= 1000 ms (p50 {p50:.0f}; the provider's resume_command {resumed}/{n})",
            passed=p95 <= AIMS["follow_up_p95_ms"] and failures == 0 and resumed == n,
        )
        self.recorder.record("runner.follow_up_p95", p95, conditions={"every run resumed and succeeded": resumed == n})

    # --- scale ---------------------------------------------------------------------------------------------
    def part_scale(self) -> None:
        a = self.args
        n, window = a.scale_runs, a.scale_window
        say(f"part scale: {n} concurrent `sleep {self.scale_sleep}` runs on one runner, window {window:g} s")
        self.wait_for_quiet("scale")
        self.recorder.start()
        pid = self.runner.pid
        rest = memory_mb(pid)
        cpu0, t0 = cpu_seconds(pid), time.monotonic()
        runs = [self.queue("sleeper")[0] for _ in range(n)]
        while True:
            running = self.pg.scalar(
                "SELECT count(*) FROM runners_run WHERE id = ANY(%s) AND status = 'running'", [runs]
            )
            if running == n:
                break
            if time.monotonic() - t0 > 120:
                raise foundation.BenchError(f"only {running}/{n} runs running after 120 s:\n{self.runner_tail()}")
            time.sleep(0.1)
        ramp = time.monotonic() - t0
        ramp_cpu = cpu_seconds(pid) - cpu0
        say(f"  all {n} running after {ramp:.1f} s (runner CPU during the ramp {ramp_cpu:.2f} s)")
        time.sleep(2)  # the last ones' first ticks and state saves
        samples = []
        cpu1, w0 = cpu_seconds(pid), time.monotonic()
        while time.monotonic() - w0 < window:
            time.sleep(1)
            samples.append(memory_mb(pid))
        cpu2, w1 = cpu_seconds(pid), time.monotonic()
        seconds = w1 - w0
        still = self.pg.scalar("SELECT count(*) FROM runners_run WHERE id = ANY(%s) AND status = 'running'", [runs])
        cpu_total_pct = (cpu2 - cpu1) / seconds * 100
        per_run_pct = cpu_total_pct / n
        rss = max(s["VmRSS"] for s in samples)
        pss = max(s.get("Pss", 0) for s in samples)
        threads = max(s.get("Threads", 0) for s in samples)
        say(
            f"  runner over {seconds:.1f} s with {still} running: CPU {cpu_total_pct:.2f} % of a core in total, "
            f"{per_run_pct:.3f} % per run; RSS {rss:.1f} MB (at rest {rest['VmRSS']:.1f}), PSS {pss:.1f} MB, "
            f"{threads:.0f} threads"
        )
        base = self.scale_baseline(n, window)
        say(
            f"  raw: one Python process Popen-ing {n} sleeps: CPU {base['cpu_pct']:.3f} % of a core, "
            f"RSS {base['VmRSS']:.1f} MB, PSS {base.get('Pss', 0):.1f} MB"
        )
        # Done measuring: cancel them all (the runner stops each agent's group) rather than wait.
        say(f"  cancelling the {n} runs")
        c0 = time.monotonic()
        for run_id in runs:
            r = self.http.post(f"runs/{run_id}/cancel/")
            if r.status_code >= 300:
                say(f"  cancel of run {run_id} answered {r.status_code}: {r.text[:200]}")
        for run_id in runs:
            self.wait_end(run_id, timeout=120, poll=0.2)
        cancel_s = time.monotonic() - c0
        failed = self.pg.scalar("SELECT count(*) FROM runners_run WHERE id = ANY(%s) AND status <> 'cancelled'", [runs])
        say(f"  all {n} ended {cancel_s:.1f} s after the first cancel; not cancelled: {failed}")
        self.details["scale"] = {
            "runs": n,
            "window_s": seconds,
            "running_at_end_of_window": still,
            "ramp_s": ramp,
            "ramp_cpu_s": ramp_cpu,
            "cpu_total_pct": cpu_total_pct,
            "cpu_pct_per_run": per_run_pct,
            "rss_mb": rss,
            "pss_mb": pss,
            "threads": threads,
            "at_rest": rest,
            "samples": samples,
            "baseline": base,
            "not_cancelled": failed,
            "cancel_all_s": cancel_s,
        }
        self.add_figure(
            name=f"scale: runner CPU with {n} runs",
            unit="CPU ms/s",
            ours=cpu_total_pct * 10,
            p50_ms=None,
            p99_ms=None,
            failed=failed,
            raw=base["cpu_pct"] * 10 or None,
            raw_what="python Popen + wait, CPU ms/s",
            target=f"< 2 % of a core per run ({per_run_pct:.3f} %; {cpu_total_pct:.2f} % in total; raw {base['cpu_pct']:.3f} %)",
            # The figure is "CPU per run-second": a run's share of a core. The total is beside it.
            passed=per_run_pct < AIMS["scale_cpu_pct_per_run"] and still == n and failed == 0,
        )
        self.add_figure(
            name=f"scale: runner RSS with {n} runs",
            unit="MB",
            ours=rss,
            p50_ms=None,
            p99_ms=None,
            failed=0,
            raw=base["VmRSS"],
            raw_what="python Popen + wait, RSS MB",
            target=f"< 30 MB (PSS {pss:.1f}; raw PSS {base.get('Pss', 0):.1f})",
            passed=rss < AIMS["scale_rss_mb"],
        )
        kept = {"every run kept running": still == n, "every run cancelled": failed == 0}
        self.recorder.record("runner.scale_cpu", per_run_pct, raw=base["cpu_pct"] / n or None, conditions=kept)
        self.recorder.record("runner.scale_rss", rss, raw=base["VmRSS"])

    def scale_baseline(self, n: int, window: float) -> dict:
        code = (
            "import subprocess, sys\n"
            f"ps = [subprocess.Popen(['sleep', '{int(window + 10)}']) for _ in range({n})]\n"
            "print('started', flush=True)\n"
            "[p.wait() for p in ps]\n"
        )
        # Its own process group, so its sleeps go with it at the end.
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, start_new_session=True)
        try:
            proc.stdout.readline()
            time.sleep(1)
            cpu0, t0 = cpu_seconds(proc.pid), time.monotonic()
            samples = []
            while time.monotonic() - t0 < window:
                time.sleep(1)
                samples.append(memory_mb(proc.pid))
            cpu = cpu_seconds(proc.pid) - cpu0
            seconds = time.monotonic() - t0
            return {
                "cpu_pct": cpu / seconds * 100,
                "VmRSS": max(s["VmRSS"] for s in samples),
                "Pss": max(s.get("Pss", 0) for s in samples),
                "window_s": seconds,
            }
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    # --- waiting --------------------------------------------------------------------------------------------
    def agents_of(self, runs: list[int]) -> int:
        """Processes whose environment names one of ``runs`` (SWITCHYARD_RUN): the runs' agents."""
        marks = {f"SWITCHYARD_RUN={run_id}".encode() for run_id in runs}
        found = 0
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    if marks & set((entry / "environ").read_bytes().split(b"\0")):
                        found += 1
        return found

    def window(self, pid: int, seconds: float) -> dict:
        samples, cpu0, t0 = [], cpu_seconds(pid), time.monotonic()
        while time.monotonic() - t0 < seconds:
            time.sleep(1)
            samples.append(memory_mb(pid))
        took = time.monotonic() - t0
        return {
            "cpu_pct": (cpu_seconds(pid) - cpu0) / took * 100,
            "VmRSS": max(s["VmRSS"] for s in samples),
            "Pss": max(s.get("Pss", 0) for s in samples),
            "Threads": max(s.get("Threads", 0) for s in samples),
            "window_s": took,
        }

    def part_waiting(self) -> None:
        a = self.args
        n, pid = a.waiting_runs, self.runner.pid
        say(f"part waiting: {n} runs whose agent defers a tool call to a person, then {a.resume_runs} answered")
        self.wait_for_quiet("waiting")
        self.recorder.start()
        idle = self.window(pid, min(a.scale_window, 10.0))
        t0 = time.monotonic()
        runs = [self.queue("deferring")[0] for _ in range(n)]
        while True:
            waiting = self.pg.scalar(
                "SELECT count(*) FROM runners_run WHERE id = ANY(%s) AND status = 'waiting'", [runs]
            )
            if waiting == n:
                break
            ended = self.pg.scalar(
                "SELECT count(*) FROM runners_run WHERE id = ANY(%s) AND status IN ('succeeded', 'failed')", [runs]
            )
            if ended or time.monotonic() - t0 > 300:
                raise foundation.BenchError(f"{waiting}/{n} waiting, {ended} ended after all:\n{self.runner_tail()}")
            time.sleep(0.2)
        say(f"  all {n} waiting after {time.monotonic() - t0:.1f} s")
        time.sleep(2)  # the last ones' state files and threads gone
        agents = self.agents_of(runs)
        held = self.pg.scalar(
            "SELECT count(*) FROM runners_run WHERE id = ANY(%s) AND status IN ('assigned', 'starting', 'running')",
            [runs],
        )
        parked = self.window(pid, a.scale_window)
        say(
            f"  runner with {n} waiting, over {parked['window_s']:.1f} s: CPU {parked['cpu_pct']:.3f} % of a core "
            f"(idle before: {idle['cpu_pct']:.3f} %); RSS {parked['VmRSS']:.1f} MB (idle {idle['VmRSS']:.1f}), "
            f"PSS {parked['Pss']:.1f} MB; agent processes left: {agents}; runs it holds: {held}"
        )
        latencies = []
        for run_id in runs[: a.resume_runs]:
            t_answer = time.time()
            r = self.http.post(f"runs/{run_id}/answer/", json={"decision": "allow"})
            if r.status_code != 200:
                raise foundation.BenchError(f"answering run {run_id} answered {r.status_code}: {r.text[:300]}")
            stamp = self.wait_tool_line(run_id)
            latencies.append((stamp - t_answer) * 1000)
            end = self.wait_end(run_id, timeout=60)
            if end["status"] != "succeeded":
                raise foundation.BenchError(f"resumed run {run_id} ended {end['status']}: {end.get('error', '')[:300]}")
        p50, p95 = percentile(latencies, 50), percentile(latencies, 95)
        say(f"  answer -> tool executed over {len(latencies)} resumes: p50 {p50:.0f} ms, p95 {p95:.0f} ms")
        rest = runs[a.resume_runs :]
        for run_id in rest:  # the others are cancelled: no agent to stop, ended at once
            self.http.post(f"runs/{run_id}/cancel/")
        left = self.pg.scalar("SELECT count(*) FROM runners_run WHERE id = ANY(%s) AND status = 'waiting'", [rest])
        self.details["waiting"] = {
            "runs": n,
            "idle": idle,
            "waiting": parked,
            "agent_processes_left": agents,
            "held_by_runner": held,
            "resume_ms": latencies,
            "still_waiting_after_cancel": left,
            "load": os.getloadavg(),
        }
        self.add_figure(
            name=f"waiting: runner RSS with {n} runs waiting",
            unit="MB",
            ours=parked["VmRSS"],
            p50_ms=None,
            p99_ms=None,
            failed=agents,
            raw=idle["VmRSS"],
            raw_what="the same runner idle, RSS MB",
            target=f"< 30 MB and no agent process ({agents} left; CPU {parked['cpu_pct']:.3f} % of a core)",
            passed=parked["VmRSS"] < AIMS["waiting_rss_mb"] and agents == 0 and held == 0,
        )
        self.add_figure(
            name="waiting: answer -> tool executed",
            unit="ms p95",
            ours=p95,
            p50_ms=p50,
            p99_ms=None,
            failed=0,
            raw=None,
            raw_what="none: the stand-in agent's start is part of it",
            target="p95 <= 2 s on an idle runner",
            passed=p95 <= AIMS["resume_p95_ms"],
        )
        kept = {"no agent process while waiting": agents == 0, "none held by the runner": held == 0}
        self.recorder.record("runner.waiting_rss", parked["VmRSS"], raw=idle["VmRSS"], conditions=kept)
        self.recorder.record("runner.waiting_cpu", parked["cpu_pct"], raw=idle["cpu_pct"], conditions=kept)
        self.recorder.record("runner.resume_p95", p95)

    def wait_tool_line(self, run_id: int, timeout: float = 30) -> float:
        """The resumed agent's ``<time> tool allow`` line: it goes on in the job log the run waited with."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for path in glob.glob(str(self.runner_root / "running-jobs" / f"job-*-{run_id}.log")):
                with contextlib.suppress(OSError):
                    for line in Path(path).read_text(errors="replace").splitlines():
                        if line.endswith(" tool allow"):
                            return float(line.split()[0])
            time.sleep(0.002)
        raise foundation.BenchError(f"run {run_id}: no tool line {timeout:g} s after the answer:\n{self.runner_tail()}")

    # --- logs ------------------------------------------------------------------------------------------------
    def part_logs(self) -> None:
        self.logs_throughput()
        self.logs_latency()

    def raw_cat(self) -> float:
        out = self.server_log_root() / "raw-cat.txt"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.unlink(missing_ok=True)
        t0 = time.perf_counter()
        with open(out, "wb") as fh:
            subprocess.run(["cat", str(self.big)], stdout=fh, check=True)
            os.fsync(fh.fileno())
        seconds = time.perf_counter() - t0
        out.unlink()
        return seconds

    def server_log_root(self) -> Path:
        return self.workdir / "var" / "logs"

    def logs_throughput(self) -> None:
        a = self.args
        size = self.big.stat().st_size
        mib = size / 2**20
        say(f"part logs/throughput: `cat` of {mib:.0f} MiB through the runner, {a.log_rounds} round(s)")
        self.wait_for_quiet("logs")
        self.recorder.start()
        raws, ours, walls, checks = [], [], [], []
        for rnd in range(a.log_rounds):
            raws.append(self.raw_cat())
            workers = self.server.worker_pids()
            cpu_before = [sum(cpu_seconds(p) for p in workers), cpu_seconds(self.runner.pid)]
            run_id, queued = self.queue("bigcat")
            job = self.job_log(run_id)
            started = self.wait_stamp(job)
            head = len(open(job, "rb").readline())  # noqa: SIM115 - one line
            session = self.session_of(run_id)
            target = head + size
            path = self.server_log_file(session)
            deadline = time.monotonic() + 600
            while True:
                with contextlib.suppress(OSError):
                    if path.stat().st_size >= target:
                        break
                    if not path.exists():
                        path = self.server_log_file(session)
                if time.monotonic() > deadline:
                    raise foundation.BenchError(f"the server's log of run {run_id} did not reach {target} bytes")
                time.sleep(0.005)
            done = time.time()
            cpu = [sum(cpu_seconds(p) for p in workers) - cpu_before[0], cpu_seconds(self.runner.pid) - cpu_before[1]]
            end = self.wait_end(run_id, timeout=120)
            ended = time.time()
            seconds = done - started
            ours.append(seconds)
            walls.append(ended - queued)
            # The API sees it all, and the server's copy is the agent's output byte for byte.
            r = self.staff.get(f"sessions/{session}/log/", params={"offset": target, "limit": 1})
            api_size = r.json().get("size") if r.status_code == 200 else None
            with open(path, "rb") as fh:
                fh.readline()
                same = hashlib.md5(fh.read()).digest() == hashlib.md5(self.big.read_bytes()).digest()
            checks.append(
                {
                    "api_size": api_size,
                    "target": target,
                    "identical": same,
                    "status": end["status"],
                    "server_cpu_s": cpu[0],
                    "runner_cpu_s": cpu[1],
                }
            )
            say(
                f"  round {rnd + 1}: ours {seconds:.2f} s = {mib / seconds:.0f} MiB/s (start -> server has all; "
                f"queued -> run ended {walls[-1]:.2f} s); raw cat+fsync {raws[-1]:.2f} s = {mib / raws[-1]:.0f} MiB/s; "
                f"API size {api_size} of {target}, byte-identical {same}, run {end['status']}; CPU server "
                f"{cpu[0]:.2f} s, runner {cpu[1]:.2f} s"
            )
        raws.append(self.raw_cat())
        ours_s, raw_s = statistics.median(ours), statistics.median(raws)
        ratio = raw_s / ours_s
        say(
            f"  throughput: ours {mib / ours_s:.0f} MiB/s, raw {mib / raw_s:.0f} MiB/s (medians): ratio {ratio:.2f} "
            f"(aim >= {AIMS['log_ratio']})"
        )
        ok = all(c["identical"] and c["api_size"] == c["target"] and c["status"] == "succeeded" for c in checks)
        self.details["log_throughput"] = {
            "mib": mib,
            "ours_s": ours,
            "raw_s": raws,
            "queued_to_ended_s": walls,
            "ratio": ratio,
            "checks": checks,
        }
        self.add_figure(
            name=f"logs: {mib:.0f} MiB shipped",
            unit="MiB/s",
            ours=mib / ours_s,
            p50_ms=None,
            p99_ms=None,
            failed=sum(not (c["identical"] and c["api_size"] == c["target"]) for c in checks),
            raw=mib / raw_s,
            raw_what="cat > file + fsync, MiB/s",
            target=">= 0.5 of raw",
            passed=ratio >= AIMS["log_ratio"] and ok,
        )
        identical = {"the server's copy identical": ok}
        self.recorder.record("runner.log_throughput", mib / ours_s, raw=mib / raw_s, conditions=identical)

    def logs_latency(self) -> None:
        a = self.args
        poll = a.poll_ms / 1000
        say(
            f"part logs/latency: a line every {TICK_PERIOD * 1000:.0f} ms for ~{a.tick_seconds:g} s, API polled every {a.poll_ms:g} ms"
        )
        self.wait_for_quiet("latency")
        self.recorder.start()
        run_id, _ = self.queue("ticker")
        session = self.session_of(run_id)
        offset, buf, lat, polls, seen = 0, b"", [], 0, set()
        t_first = time.monotonic()
        finished = False
        deadline = time.monotonic() + a.tick_seconds * 3 + 60
        while time.monotonic() < deadline:
            t = time.monotonic()
            r = self.staff.get(f"sessions/{session}/log/", params={"offset": offset, "limit": MAX_READ})
            if r.status_code != 200:
                raise foundation.BenchError(f"GET sessions/{session}/log/ answered {r.status_code}: {r.text[:300]}")
            now = time.time()
            polls += 1
            body = r.json()
            data = body.get("data", "").encode()
            offset = body.get("next_offset", offset)
            buf += data
            *lines, buf = buf.split(b"\n")
            for line in lines:
                parts = line.split()
                if len(parts) == 3 and parts[0] == b"tick":
                    seen.add(int(parts[1]))
                    lat.append((now - float(parts[2])) * 1000)
            if finished and not data:
                break
            if not finished and polls % 25 == 0:
                finished = self.run_get(run_id)["status"] in TERMINAL
            time.sleep(max(0.0, poll - (time.monotonic() - t)))
        interval = (time.monotonic() - t_first) / max(1, polls) * 1000
        end = self.wait_end(run_id, timeout=60)
        if not lat:
            raise foundation.BenchError(f"no tick line seen in the log API (polls {polls}, run {end['status']})")
        p50, p95 = statistics.median(lat), percentile(lat, 95)
        expected = max(seen) + 1 if seen else 0
        say(
            f"  line -> API: p50 {p50:.0f} ms, p95 {p95:.0f} ms, max {max(lat):.0f} ms over {len(lat)} lines "
            f"({expected - len(seen)} missing); poll every {interval:.1f} ms measured; run {end['status']}"
        )
        self.details["log_latency"] = {
            "lines": len(lat),
            "missing": expected - len(seen),
            "p50_ms": p50,
            "p95_ms": p95,
            "max_ms": max(lat),
            "poll_interval_ms": interval,
            "ms": lat,
        }
        self.add_figure(
            name="logs: line written -> seen in the API",
            unit="ms (p50)",
            ours=p50,
            p50_ms=p50,
            p99_ms=None,
            failed=expected - len(seen),
            raw=interval,
            raw_what="the bench's poll interval, ms",
            target=f"p95 <= 1000 ms (p95 {p95:.0f}, incl. the {interval:.0f} ms poll)",
            passed=p95 <= AIMS["log_line_p95_ms"] and expected == len(seen),
        )
        self.recorder.record("runner.log_line_p95", p95, conditions={"no line missing": expected == len(seen)})

    def run(self) -> int:
        self.check_services()
        self.setup_database()
        self.start_server()
        self.setup_runner_world()
        for part in PARTS:
            if part in self.args.parts:
                getattr(self, f"part_{part}")()
        self.details["runner_after"] = memory_mb(self.runner.pid)
        return 0


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    pass


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=HelpFormatter,
        epilog="Any other option is bench/run.py's (--db, --redis-url, --workers, --server, --quiet-wait, "
        "--keep-db, ...): see `bench/run.py --help`. What each figure measures: the top of this file and "
        'bench/HISTORY.md, "Runners (issue 13)".',
    )
    parser.add_argument("--quick", action="store_true", help="a small run: 30 dispatches, 20 runs for 10 s, 10 MiB")
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, from {', '.join(PARTS)}")
    parser.add_argument("--dispatch-runs", type=int, default=200)
    parser.add_argument("--cancel-runs", type=int, default=50, help="running runs asked to stop, one at a time")
    parser.add_argument("--sandbox-runs", type=int, default=200, help="dispatches of each kind in the sandbox part")
    parser.add_argument("--follow-up-runs", type=int, default=100, help="requests for changes timed")
    parser.add_argument("--scale-runs", type=int, default=100, help="concurrent runs (and the runner's capacity)")
    parser.add_argument("--scale-window", type=float, default=20.0, help="seconds measured with all runs running")
    parser.add_argument("--waiting-runs", type=int, default=100, help="runs left waiting for a person at once")
    parser.add_argument("--resume-runs", type=int, default=50, help="waiting runs answered, one at a time, timed")
    parser.add_argument("--log-mb", type=int, default=50, help="MiB of output for the throughput figure")
    parser.add_argument("--log-rounds", type=int, default=2, help="runs of the throughput figure (median)")
    parser.add_argument("--tick-seconds", type=float, default=20.0, help="how long the line-latency agent prints")
    parser.add_argument("--poll-ms", type=float, default=20.0, help="how often the bench polls the log API")
    parser.add_argument(
        "--runner-whatif",
        default="",
        help="start the runner through bench/runner_whatif.py with these candidate fixes patched in "
        "(comma-separated: shared-ssl, chunk-1m, no-httpx-cli, stat-first, idle-backoff, tick-50ms, trace-ship)",
    )
    parser.add_argument(
        "--runner-pythonpath",
        default="",
        help="a folder holding another switchyard_client package for the runner to import (put first on "
        "its PYTHONPATH), e.g. a copy saved before a change, for an interleaved A/B",
    )
    parser.add_argument(
        "--runner-bin",
        default="",
        help="the `switchyard` program to start the runner with (default: this venv's), e.g. one from a venv "
        "holding only `pip install ./client`, as a runner machine has it",
    )
    own, rest = parser.parse_known_args(argv)
    if own.quick:
        own.dispatch_runs, own.scale_runs, own.scale_window, own.sandbox_runs = 30, 20, 10.0, 30
        own.follow_up_runs, own.cancel_runs = 20, 10
        own.waiting_runs, own.resume_runs = 20, 10
        own.log_mb, own.log_rounds, own.tick_seconds = 10, 1, 5.0
    defaults = ["--db", "switchyard_bench_runner", "--redis-url", "redis://127.0.0.1:6379/13"]
    # One key (bench-agent-00, scopes agent + orchestrate): it queues the runs and reads the logs.
    args = foundation.parse_args([*defaults, "--agents", "1", "--clients", "1", "--batch-clients", "1", *rest])
    for key, value in vars(own).items():
        setattr(args, key, value)
    args.parts = [p.strip() for p in own.parts.split(",") if p.strip()]
    if set(args.parts) - set(PARTS):
        parser.error(f"--parts takes {', '.join(PARTS)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    os.chdir(foundation.ROOT)
    bench = RunnerBench(args)
    if args.runner_whatif or args.runner_pythonpath:
        bench.recorder.enabled = False  # a what-if or another client: figures.json keeps this code's
    code = report.run_guarded(bench)
    if bench.figures:
        print()
        print(bench.table())
        body = {
            "args": vars(args),
            "machine_load_at_end": os.getloadavg(),
            "figures": bench.figures,
            "details": bench.details,
        }
        report.written(report.write_json(foundation.RESULTS_DIR / f"{bench.stamp}-runner.json", body))
    print(bench.recorder.note())
    return code


if __name__ == "__main__":
    sys.exit(main())
