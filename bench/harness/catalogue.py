"""Every figure the benchmarks record in bench/figures.json, declared once: its name, the script that
measures it, its unit, which way is better, what its raw baseline is (or why it has none) and its aim.

The aims are the issues' (2, 3, 4, 5, 6, 12, 13, 15), as bench/HISTORY.md quotes them. A figure without
an aim is for information: it neither passes nor misses. The order is bench/README.md's table's.
Standard library only: bench/report.py runs without the project's venv.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq}


@dataclass(frozen=True)
class Aim:
    """``value op limit`` (on="value"), or ``value / raw op limit`` (on="ratio")."""

    op: str
    limit: float
    unit: str = ""
    on: str = "value"

    def text(self) -> str:
        op = "=" if self.op == "==" else self.op
        if self.on == "ratio":
            return f"{op} {self.limit:,g} of raw"
        return f"{op} {self.limit:,g} {self.unit}".rstrip()

    def met(self, value: float | None, ratio: float | None) -> bool:
        measured = ratio if self.on == "ratio" else value
        return measured is not None and OPS[self.op](measured, self.limit)


@dataclass(frozen=True)
class Spec:
    benchmark: str  # the script in bench/ that measures it
    name: str
    unit: str
    better: str  # "higher" or "lower": for the value, and so for the ratio value / raw
    raw: str  # what the raw baseline is; "none: <why>" when there is none
    aim: Aim | None

    @property
    def has_raw(self) -> bool:
        return not self.raw.startswith("none")


NO_RAW = "none: an absolute aim"
COPY = "psql COPY of the same rows, rows/s"
UP, DOWN = "higher", "lower"


def ratio_at_least(limit: float) -> Aim:
    return Aim(">=", limit, on="ratio")


# fmt: off
CATALOGUE: dict[str, Spec] = {
    # issue 2: the API
    "api.events.rps": Spec("run.py", "API single events, 16 clients, closed loop", "req/s", UP, "psql COPY of the rows the API stored, rows/s", Aim(">=", 600, "req/s")),
    "api.events.p99": Spec("run.py", "API single events, closed loop, p99", "ms", DOWN, NO_RAW, Aim("<", 50, "ms")),
    "api.events.paced_p99": Spec("run.py", "API single events paced at 600/s, p99 from due", "ms", DOWN, NO_RAW, Aim("<", 50, "ms")),
    "api.batch100": Spec("run.py", "API batches of 100 events, 8 clients", "events/s", UP, COPY, Aim(">=", 20_000, "events/s")),
    "api.batch1000": Spec("run.py", "API batches of 1,000 events, 8 clients", "events/s", UP, COPY, Aim(">=", 20_000, "events/s")),
    "api.claims.rps": Spec("run.py", "API claim-next, 32 agents, closed loop", "claims/s", UP, "SKIP LOCKED UPDATE loop on 32 connections, claims/s", Aim(">=", 500, "claims/s")),
    "api.claims.p99": Spec("run.py", "API claim-next, closed loop, p99", "ms", DOWN, "the SKIP LOCKED UPDATE loop, p99 ms", Aim("<", 50, "ms")),
    "api.claims.paced_p99": Spec("run.py", "API claim-next paced at 500/s, p99 from due", "ms", DOWN, NO_RAW, Aim("<", 50, "ms")),
    "api.claims.double": Spec("run.py", "API claim-next: tasks claimed twice", "tasks", DOWN, NO_RAW, Aim("==", 0, "tasks")),
    # issue 3: workspaces
    "workspaces.worktree_create_p95": Spec("workspaces_bench.py", "worktree create (2,000-file repository), p95", "ms", DOWN, "git worktree add on the same repository, p95 ms", Aim("<=", 300, "ms")),
    "workspaces.claims.ops": Spec("workspaces_bench.py", "worktree claim + release, 32 agents on 8 worktrees, closed loop", "ops/s", UP, "conditional UPDATE claim + release on 32 connections, ops/s", Aim(">=", 500, "ops/s")),
    "workspaces.claims.p99": Spec("workspaces_bench.py", "worktree claim and release, closed loop, p99 of either", "ms", DOWN, "the raw UPDATE loop, p99 of either, ms", Aim("<", 20, "ms")),
    "workspaces.claims.paced_ops": Spec("workspaces_bench.py", "worktree claim + release paced at 350 attempts/s", "ops/s", UP, NO_RAW, Aim(">=", 500, "ops/s")),
    "workspaces.claims.paced_p99": Spec("workspaces_bench.py", "worktree claim and release paced, p99 from due of either", "ms", DOWN, NO_RAW, Aim("<", 20, "ms")),
    "workspaces.claims.double": Spec("workspaces_bench.py", "worktree double grants (ledger)", "grants", DOWN, NO_RAW, Aim("==", 0, "grants")),
    "workspaces.upload": Spec("workspaces_bench.py", "upload of 100 MB, median of 3", "MB/s", UP, "cp + fsync of the same file on the same disk, MB/s", ratio_at_least(0.5)),
    # issue 4: sync, observer, archive
    "sync.first_run": Spec("sync_bench.py", "sync-to-db of 10,000 snapshot files, first run", "s", DOWN, "Python read + json.loads of every file, then psql COPY of the rows written, s", Aim("<=", 10, "s")),
    "sync.unchanged": Spec("sync_bench.py", "sync-to-db of 10,000 files, nothing changed, best of 3", "s", DOWN, "cat of every file, s", Aim("<=", 1, "s")),
    "observer.latency_p95": Spec("observer_bench.py", "file observer: close -> row + verified backup, p95", "ms", DOWN, "the same write then cp of the file, p95 ms", Aim("<=", 100, "ms")),
    "observer.burst_missed": Spec("observer_bench.py", "file observer: files of a 20,000-file burst never backed up", "files", DOWN, NO_RAW, Aim("==", 0, "files")),
    "archive.archive": Spec("archive_bench.py", "archive of a 1 GB workspace + verification, median of 3", "MB/s", UP, "tar --zstd -c of the same folder, MB/s", ratio_at_least(0.8)),
    "archive.restore": Spec("archive_bench.py", "restore of the 1 GB archive + verification, median of 3", "MB/s", UP, "tar --zstd -x of tar's archive, MB/s", ratio_at_least(0.8)),
    # issue 5: the board
    "board.render.200": Spec("board_bench.py", "board render, 200 tasks, p95 (SQLite)", "ms", DOWN, NO_RAW, None),
    "board.render.2000": Spec("board_bench.py", "board render, 2,000 tasks, p95 (SQLite)", "ms", DOWN, NO_RAW, Aim("<", 300, "ms")),
    "board.render.10000": Spec("board_bench.py", "board render, 10,000 tasks, p95 (SQLite)", "ms", DOWN, NO_RAW, None),
    "board.push.p50": Spec("board_bench.py", "board push to 100 clients, 1,000 moves at 50/s, committed -> received, p50 (embedded)", "ms", DOWN, NO_RAW, Aim("<=", 100, "ms")),
    "board.push.p99": Spec("board_bench.py", "board push, committed -> received, p99 (embedded)", "ms", DOWN, NO_RAW, Aim("<=", 100, "ms")),
    "board.push_redis.p50": Spec("board_bench.py", "board push, committed -> received, p50 (PostgreSQL, Redis layer)", "ms", DOWN, NO_RAW, Aim("<=", 100, "ms")),
    "board.push_redis.p99": Spec("board_bench.py", "board push, committed -> received, p99 (PostgreSQL, Redis layer)", "ms", DOWN, NO_RAW, Aim("<=", 100, "ms")),
    "board.card_read": Spec("card_read_bench.py", "card read behind a push (board_cards, one task), CPU per call", "ms", DOWN, "none: compared between commits with bench/ab.py", None),
    # issue 6: the client and its hook
    "client.hook_p95": Spec("client_bench.py", "hook wall time per call, p95", "ms", DOWN, "python -c pass in the same venv, p95 ms", Aim("<=", 50, "ms")),
    "client.throughput": Spec("client_bench.py", "client EventBatcher(1,000), 8 threads", "events/s", UP, "run.py's batch of 1,000 in the same run, events/s", ratio_at_least(0.8)),
    # issue 12: redaction
    "redaction.per_event": Spec("redaction_bench.py", "redaction of an event, over EVENT_MIX", "µs", DOWN, "json.dumps of the same payloads, µs", None),
    "redaction.batch1000_mixed": Spec("run.py", "API batches of 1,000 mixed events (redaction at work)", "events/s", UP, COPY, Aim(">=", 20_000, "events/s")),
    # issue 13: runners
    "runner.dispatch_p50": Spec("runner_bench.py", "runner dispatch: queued -> agent started, p50", "ms", DOWN, "Popen of the same command -> first line, p50 ms", Aim("<=", 250, "ms")),
    "runner.dispatch_p95": Spec("runner_bench.py", "runner dispatch: queued -> agent started, p95", "ms", DOWN, "Popen of the same command -> first line, p95 ms", Aim("<=", 1000, "ms")),
    "runner.cancel_p95": Spec("runner_bench.py", "runner cancel: stop asked -> the agent's TERM, p95", "ms", DOWN, "killpg(SIGTERM) of the same agent -> its handler's line, p95 ms", Aim("<=", 1000, "ms")),
    "runner.follow_up_p95": Spec("runner_bench.py", "runner: request changes -> continuing agent started, p95", "ms", DOWN, "none: the resume_command's own start is part of it", Aim("<=", 1000, "ms")),
    "runner.scale_cpu": Spec("runner_bench.py", "runner CPU with 100 runs, per run", "% of a core", DOWN, "python Popen-ing as many sleeps, per run", Aim("<", 2, "% of a core")),
    "runner.scale_rss": Spec("runner_bench.py", "runner RSS with 100 runs", "MB", DOWN, "python Popen-ing as many sleeps, RSS MB", Aim("<", 30, "MB")),
    "runner.log_throughput": Spec("runner_bench.py", "runner log shipping, 50 MiB", "MiB/s", UP, "cat of the same file into a file + fsync, MiB/s", ratio_at_least(0.5)),
    "runner.log_line_p95": Spec("runner_bench.py", "runner log: line written -> seen in the log API, p95", "ms", DOWN, "none: the API polled every 20 ms, part of the figure", Aim("<=", 1000, "ms")),
    # issue 26 §1: a sandbox per run
    "runner.sandbox_dispatch_added_p95": Spec("runner_bench.py", "runner dispatch p95: what the sandbox adds (200 runs each, interleaved)", "ms", DOWN, "none: the figure is sandboxed p95 less the same runs' unsandboxed p95, measured beside them", Aim("<=", 50, "ms")),
    "runner.sandbox_tool_heavy": Spec("runner_bench.py", "runner: a tool-heavy run's wall time, sandboxed, median of 5", "s", DOWN, "the same run unsandboxed, interleaved, median s", Aim("<=", 1.05, on="ratio")),
    # issue 26 §2: a run that waits for a person holds no process
    "runner.waiting_rss": Spec("runner_bench.py", "runner RSS with 100 runs waiting for a person", "MB", DOWN, "the same runner idle before they were queued, RSS MB", Aim("<", 30, "MB")),
    "runner.waiting_cpu": Spec("runner_bench.py", "runner CPU with 100 runs waiting for a person", "% of a core", DOWN, "the same runner idle before they were queued, % of a core", None),
    "runner.resume_p95": Spec("runner_bench.py", "runner: answer given -> deferred tool executed, p95", "ms", DOWN, "none: the agent's own start is part of it", Aim("<=", 2000, "ms")),
    # issue 25: ship
    "ship.merge_200_commits": Spec("merge_bench.py", "merge of a 200-commit branch (task_merge, in-process), median", "ms", DOWN, "git merge --no-ff of the same branch in the same checkout, median ms", Aim("<=", 1.2, on="ratio")),
    # issue 15: OTLP
    "otlp.protobuf": Spec("otlp_bench.py", "OTLP protobuf, 1,000 records per export, 8 clients", "records/s", UP, "batch events endpoint (1,000 per POST) in the phases beside it, events/s", ratio_at_least(0.5)),
    "otlp.json": Spec("otlp_bench.py", "OTLP JSON, 1,000 records per export, 8 clients", "records/s", UP, "batch events endpoint (1,000 per POST) in the phases beside it, events/s", ratio_at_least(0.5)),
    # issue 25: reviewing a task's change
    "review.page_p95": Spec("diff_bench.py", "change page render, 5,000 lines in 200 files, p95 (SQLite)", "ms", DOWN, NO_RAW, Aim("<=", 300, "ms")),
    "review.first_screen_p95": Spec("diff_bench.py", "change page, 5,000 lines in 200 files: navigation -> first screen interactive in Chromium, p95", "ms", DOWN, NO_RAW, Aim("<=", 1000, "ms")),
    "review.diff_json_p95": Spec("diff_bench.py", "GET /tasks/{id}/diff/?format=json, 5,000 lines in 200 files, cold, p95", "ms", DOWN, "git diff of the same branches, interleaved, p95 ms", Aim("<=", 1.5, on="ratio")),
    "review.diff_json_warm_p95": Spec("diff_bench.py", "GET /tasks/{id}/diff/?format=json, the same change seen before, p95", "ms", DOWN, "git diff of the same branches, interleaved, p95 ms", Aim("<=", 1.5, on="ratio")),
    "review.huge_page": Spec("diff_bench.py", "change page render, 10,000 files and a 50 MB file, median of 3", "ms", DOWN, NO_RAW, None),
}
# fmt: on
