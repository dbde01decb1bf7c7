"""`switchyard runner`: ask Switchyard for runs, start the agents, ship their logs, report how they ended.

Threads: the main one heartbeats (every ``heartbeat_seconds`` the server asks for) and reports the
runs held; one long-polls ``/runners/me/next/`` for work and cancels; one per run starts it, watches
its agent while its log grows and finishes it (see RunWorker); one watches all the idle runs (see
Watcher). What each run needs after a crash is in ``<root>/runs/<id>.json``
(state.py): a restarted runner asks the server which runs it still holds, re-adopts agents
that are still alive, and resumes the others with a new attempt.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from switchyard_client import __version__
from switchyard_client.api.client import Client
from switchyard_client.api.errors import ConnectionFailed, SwitchyardError
from switchyard_client.api.retry import RetryPolicy
from switchyard_client.runner.config import ProviderConfig, RunnerConfig, RunnerConfigError
from switchyard_client.runner.git import GitError, changes_since, git, head
from switchyard_client.runner.logship import (
    EVENTS_PER_BATCH,
    LeaseLost,
    is_lease_lost,
    last_lines,
    parse_lines,
    ship_log,
)
from switchyard_client.runner.process import describe_exit, read_exit_file, spawn, stop_group
from switchyard_client.runner.providers import render, resume_prompt, template_values
from switchyard_client.runner.repos import (
    REPORT_EVERY,
    HostedRepository,
    repository_check,
    sync_links_in,
    worktree_add,
)
from switchyard_client.runner.repos import reports as worktree_reports
from switchyard_client.runner.repos import worktree_remove as hosted_worktree_remove
from switchyard_client.runner.state import RunState, StateStore, pid_start_time, same_process

TICK = 0.2  # how often a run's log is shipped while it grows, and its agent checked
# A run whose log has not grown for IDLE_TICKS ticks is handed to the Watcher, which looks at all such
# runs every IDLE_TICK, until one grows again (a cancel or drop still wakes it at once): 100 quiet runs
# cost ~1 % of a core, not 8 %, and no thread each.
IDLE_TICKS = 5
IDLE_TICK = 1.0
# After a tick that shipped, at least this much written meanwhile (a burst still being written, as a
# `cat` of a big file) is shipped at once instead of after the next tick.
BURST_BYTES = 1024 * 1024
STATE_SAVE_EVERY = 1.0
PARSE_MAX = 4 * 1024 * 1024  # log bytes turned into events per tick, at most
POLL_WAIT = 25
UNKNOWN_GRACE = 2  # heartbeats a held run we know nothing of is tolerated (its assignment may be in flight)
_SLUG = re.compile(r"[a-z0-9][a-z0-9-]{0,31}")
API_RETRY = RetryPolicy(attempts=3, base_delay=0.2, max_delay=2.0)


class Console:
    """One line per thing a person wants to know (a run started, a run ended, the server went
    away or came back); nothing per tick."""

    def __init__(self, name: str, out: TextIO | None = None):
        self.name = name
        self.out = out or sys.stdout
        self.lock = threading.Lock()

    def say(self, message: str) -> None:
        with self.lock:
            stamp = dt.datetime.now().strftime("%H:%M:%S")
            print(f"{stamp} runner {self.name}: {message}", file=self.out, flush=True)


class RunnerRun(Exception):
    """Ends a run's thread without reporting anything (dropped, detached)."""


class Runner:
    def __init__(
        self,
        config: RunnerConfig,
        providers: dict[str, ProviderConfig],
        *,
        out: TextIO | None = None,
        on_exit: str = "leave",
    ):
        self.config = config
        self.providers = providers
        self.console = Console(config.name, out)
        self.api = Client(config.url, config.key, timeout=20, retry=API_RETRY)
        self.poll_api = Client(config.url, config.key, timeout=POLL_WAIT + 15, retry=API_RETRY)
        self.root = config.root
        self.store = StateStore(self.root)
        self.jobs = self.root / "running-jobs"
        self.jobs.mkdir(parents=True, exist_ok=True)
        self.workers: dict[int, RunWorker] = {}
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.on_exit = on_exit
        self.heartbeat_seconds = 10.0
        self.unknown: dict[int, int] = {}
        self.online: bool | None = None
        self.repos: list[HostedRepository] = []  # the clones on this machine, once registered
        self.reported_at = 0.0  # when the worktrees were last reported (0: with the next heartbeat)
        self.watcher = Watcher(self)

    # --- server ---------------------------------------------------------------------------------------
    def _reachable(self, ok: bool, why: str = "") -> None:
        if ok and self.online is False:
            self.console.say("Switchyard answers again")
        elif not ok and self.online is not False:
            self.console.say(f"Switchyard unreachable ({why}); retrying")
        self.online = ok

    def heartbeat(self, runs: list[dict[str, Any]] | None = None) -> dict[str, Any] | None:
        if runs is None:
            with self.lock:
                runs = [w.report() for w in self.workers.values()]
        reported = {item["id"]: item["attempt"] for item in runs}
        body = {
            "host": self.config.host,
            "labels": self.config.labels
            + [f"repo:{r.name}" for r in self.repos if f"repo:{r.name}" not in self.config.labels],
            "providers": sorted(self.providers),
            "capacity": self.config.capacity,
            "version": __version__,
            "draining": False,
            "runs": runs,
        }
        if self.repos and time.monotonic() - self.reported_at >= REPORT_EVERY:
            body["worktrees"] = worktree_reports(self.repos)
            self.reported_at = time.monotonic()
        try:
            answer = self.api.request("POST", "runners/me/heartbeat/", json=body).json()
        except ConnectionFailed as exc:
            self._reachable(False, exc.message)
            return None
        self._reachable(True)
        self.heartbeat_seconds = float(answer.get("heartbeat_seconds") or 10)
        self._cancel(answer.get("cancel") or [])
        for run_id in answer.get("dropped") or []:
            worker = self.workers.get(run_id)
            # Only the attempt we reported: a run that just restarted (attempt + 1) is still ours.
            if worker and worker.state.attempt == reported.get(run_id):
                worker.drop()
        self._unknown_held(answer.get("held") or [])
        self._remove_worktrees(answer.get("remove_worktrees") or [])
        return answer

    def _remove_worktrees(self, removals: list[dict[str, Any]]) -> None:
        """Folders of worktrees removed on the server (by a person, or the admin): remove them here."""
        for item in removals:
            path = str(item.get("path") or "")
            repo = next((r for r in self.repos if os.path.dirname(path) == r.parent), None)
            if repo is None:
                continue
            try:
                hosted_worktree_remove(repo, path, force=bool(item.get("force")))
                self.console.say(f"worktree {path} removed, as Switchyard asked")
            except (GitError, OSError) as exc:
                self.console.say(f"worktree {path} was removed in Switchyard but stays here: {exc}")
        if removals:
            self.reported_at = 0.0  # say at once that they are gone

    def register_repositories(self) -> bool:
        """Start-up: check each configured clone and register it (RunnerConfigError or a refusal
        stops the runner). Waits for the server like ``recover``; False if stopped meanwhile."""
        repos = [repository_check(item) for item in self.config.repositories]
        for repo in repos:
            body = {"name": repo.name, "path": repo.path, "default_branch": repo.default_branch}
            while True:
                try:
                    answer = self.api.request("POST", "runners/me/repositories/", json=body).json()
                    break
                except ConnectionFailed as exc:
                    self._reachable(False, exc.message)
                    if self.stop.wait(2):
                        return False
            repo.id = int(answer["id"])
            self.console.say(f"holds repository {repo.name} at {repo.path} (default branch {repo.default_branch})")
        self.repos = repos
        return True

    def hosted(self, repository: dict[str, Any]) -> HostedRepository | None:
        """This runner's clone of an assignment's repository, if it holds it."""
        if repository.get("runner") != self.config.name:
            return None
        return next((r for r in self.repos if r.id == repository.get("id")), None)

    def _cancel(self, ids: list[int]) -> bool:
        """Tell each run's thread; True if one of them had not heard it yet."""
        new = False
        for run_id in ids:
            worker = self.workers.get(run_id)
            if worker and not worker.cancelled:
                worker.cancel()
                new = True
        return new

    def _unknown_held(self, held: list[dict[str, Any]]) -> None:
        """A run the server says we hold but we know nothing of (its assignment was lost on the
        way, or our state file is gone): after a grace period, end it failed rather than holding
        it (and renewing its lease) forever."""
        with self.lock:
            known = set(self.workers)
        seen = set()
        for item in held:
            run_id = item["id"]
            if run_id in known:
                continue
            seen.add(run_id)
            self.unknown[run_id] = self.unknown.get(run_id, 0) + 1
            if self.unknown[run_id] > UNKNOWN_GRACE:
                body = {
                    "attempt": item["attempt"],
                    "status": "failed",
                    "error": f"runner {self.config.name} lost track of this run (no local state); queue it again",
                }
                try:
                    self.api.request("POST", f"runs/{run_id}/status/", json=body)
                    self.console.say(f"run {run_id} failed: this runner had no record of it")
                except SwitchyardError:
                    pass
                seen.discard(run_id)
        self.unknown = {k: v for k, v in self.unknown.items() if k in seen}

    # --- runs -----------------------------------------------------------------------------------------
    def register(self, worker: RunWorker) -> None:
        with self.lock:
            self.workers[worker.state.id] = worker
        worker.start()

    def unregister(self, run_id: int) -> None:
        with self.lock:
            self.workers.pop(run_id, None)

    def accept(self, assignment: dict[str, Any]) -> None:
        run_id = int(assignment["id"])
        with self.lock:
            if run_id in self.workers:
                return
        state = RunState(
            id=run_id, attempt=int(assignment["attempt"]), provider=str(assignment["provider"]), assignment=assignment
        )
        self.store.save(state)
        self.register(RunWorker(self, state, "new"))

    def recover(self) -> bool:
        """Start-up: the runs of the state files, checked against what the server says we hold."""
        states = self.store.load_all()
        reports = [
            {"id": s.id, "attempt": s.attempt, "pid": s.pid, "alive": same_process(s.pid, s.pid_start)} for s in states
        ]
        answer = None
        while answer is None:
            answer = self.heartbeat(reports)
            if answer is None and self.stop.wait(2):
                return False
        held = {item["id"]: item for item in answer.get("held") or []}
        dropped = set(answer.get("dropped") or [])
        for state in states:
            item = held.get(state.id)
            alive = same_process(state.pid, state.pid_start)
            if item is None or state.id in dropped or int(item["attempt"]) != state.attempt:
                if alive:
                    stop_group(state.pid, grace=self.config.grace_seconds)
                self.store.forget(state.id)
                self.console.say(f"run {state.id} is no longer ours; forgotten{' (agent stopped)' if alive else ''}")
                continue
            if state.phase == "finishing":
                mode = "finish"
            elif alive:
                mode = "adopt"
            elif state.pid is not None:
                code = read_exit_file(state.exit_path)
                # Exited on its own while nobody watched: report that. Killed (no code, or 128+N): resume.
                mode = "exited" if code is not None and code < 128 else "resume"
            elif item.get("status") == "assigned":
                mode = "new"
            else:
                mode = "resume"
            self.register(RunWorker(self, state, mode))
            if item.get("cancel"):
                self.workers[state.id].cancel()
        return True

    def poll_loop(self) -> None:
        while not self.stop.is_set():
            try:
                response = self.poll_api.request("POST", "runners/me/next/", json={"wait": POLL_WAIT}, idempotent=False)
                answer = response.json()
            except ConnectionFailed as exc:
                self._reachable(False, exc.message)
                self.stop.wait(2)
                continue
            except SwitchyardError as exc:
                self.console.say(f"asking for work failed: {exc}")
                self.stop.wait(5)
                continue
            except ValueError:
                self.stop.wait(2)
                continue
            self._reachable(True)
            if self.stop.is_set():
                break
            for assignment in answer.get("runs") or []:
                self.accept(assignment)
            # The server answers at once while a cancel is pending; don't spin while the agent stops.
            if answer.get("cancel") and not self._cancel(answer["cancel"]) and not answer.get("runs"):
                self.stop.wait(0.5)

    def run(self) -> int:
        names = ", ".join(self.providers) or "none"
        self.console.say(
            f"serving {self.config.url} with providers {names}; capacity {self.config.capacity}; "
            f"labels {', '.join(self.config.labels) or 'none'}; files in {self.root}"
        )
        self.watcher.start()
        try:
            if not self.register_repositories() or not self.recover():
                return 0
        except RunnerConfigError as exc:
            self.console.say(str(exc))
            return exc.exit_code
        except SwitchyardError as exc:
            self.console.say(f"the server refused this runner: {exc}")
            return exc.exit_code
        poller = threading.Thread(target=self.poll_loop, name="runner-poll", daemon=True)
        poller.start()
        while not self.stop.wait(self.heartbeat_seconds):
            try:
                self.heartbeat()
            except SwitchyardError as exc:
                self.console.say(f"heartbeat refused: {exc}")
        self.shutdown()
        return 0

    def shutdown(self) -> None:
        with self.lock:
            workers = list(self.workers.values())
        for worker in workers:
            worker.wake.set()
        self.watcher.wake.set()  # the idle runs go back to their own threads, which see the stop
        for worker in workers:
            worker.join(timeout=self.config.grace_seconds + 30)
        if workers and self.on_exit == "leave":
            self.console.say(f"stopped; {len(workers)} agent(s) left running, adopted again on restart")
        else:
            self.console.say("stopped")
        self.api.close()

    def request_stop(self, *_: object) -> None:
        self.stop.set()


class Watcher(threading.Thread):
    """Watches the idle runs (agent alive, log not growing, nothing to send) in one thread instead
    of a thread each, which cost ~4 MB of a runner's memory at 100 runs (stacks, malloc arenas, frames;
    bench/README.md "Runner memory"). A run
    that has something to do again (its log grew, its agent exited, a cancel, a drop, its timeout,
    the runner stopping) gets its own thread back at once: a run's slow work (shipping a big log,
    stopping an agent) never holds up another's."""

    def __init__(self, runner: Runner):
        super().__init__(name="runner-watch", daemon=True)
        self.runner = runner
        self.lock = threading.Lock()
        self.idle: set[RunWorker] = set()
        self.closed = False
        self.wake = threading.Event()

    def park(self, worker: RunWorker) -> bool:
        """Take an idle run; False once the runner stops (the run's thread keeps it)."""
        with self.lock:
            if self.closed:
                return False
            self.idle.add(worker)
        if worker.cancelled or worker.dropped:
            self.wake.set()  # came in while the run's thread was deciding it was idle
        return True

    def run(self) -> None:
        while True:
            stopping = self.runner.stop.is_set()
            with self.lock:
                self.closed = stopping
                idle = list(self.idle)
            for worker in idle:
                if stopping or self._needs_thread(worker):
                    with self.lock:
                        self.idle.discard(worker)
                    worker.resume()
            if stopping:
                return
            self.wake.wait(IDLE_TICK)
            self.wake.clear()

    @staticmethod
    def _needs_thread(worker: RunWorker) -> bool:
        try:
            return worker.needs_thread()
        except Exception:  # the run's own thread meets it again and reports it
            return True


class RunWorker:
    """One run, from `starting` to its final status: in a thread of its own while it starts, while
    its log grows and while it finishes; an idle run is the Watcher's until it has something to do."""

    def __init__(self, runner: Runner, state: RunState, mode: str):
        self.runner = runner
        self.state = state
        self.mode = mode  # new, resume, adopt, exited, finish
        self.provider = runner.providers.get(state.provider)
        # Flags, not Events: ``wake`` does the waking, and an Event costs ~1.2 KB.
        self.cancelled = False
        self.dropped = False
        self.wake = threading.Event()
        self.popen = None
        self.agent: Client | None = None
        self.saved_at = 0.0
        self.begun = time.monotonic()
        self.ended = threading.Event()

    # --- called from other threads ----------------------------------------------------------------------
    def start(self) -> None:
        self._thread(first=True)

    def resume(self) -> None:
        """The Watcher's: this idle run has something to do again."""
        self._thread(first=False)

    def join(self, timeout: float | None = None) -> bool:
        """Wait until the run's work here is over (reported, dropped or left for a restart)."""
        return self.ended.wait(timeout)

    def cancel(self) -> None:
        self.cancelled = True
        self.wake.set()
        self.runner.watcher.wake.set()

    def drop(self) -> None:
        self.dropped = True
        self.wake.set()
        self.runner.watcher.wake.set()

    def needs_thread(self) -> bool:
        """For the Watcher: what a tick of ``_watch`` would act on, checked without sending anything."""
        s = self.state
        if self.cancelled or self.dropped or self.runner.stop.is_set():
            return True
        timeout = self.provider.timeout_seconds if self.provider else None
        if timeout and s.started_at and time.time() - s.started_at > timeout:
            return True
        return self._exited() or not self._quiet()

    def report(self) -> dict[str, Any]:
        s = self.state
        return {"id": s.id, "attempt": s.attempt, "pid": s.pid, "alive": self._alive()}

    # --- the run ------------------------------------------------------------------------------------------
    def say(self, message: str) -> None:
        self.runner.console.say(f"run {self.state.id} {message}")

    def _thread(self, *, first: bool) -> None:
        threading.Thread(target=self._run, args=(first,), name=f"run-{self.state.id}", daemon=True).start()

    def _run(self, first: bool) -> None:
        s = self.state
        idle = False
        try:
            if first:
                if s.agent_key:
                    self.agent = self._agent_client(s.agent_key)
                if self.mode in ("new", "resume"):
                    self._start(resume=self.mode == "resume")
                elif self.mode in ("adopt", "exited"):
                    if self.mode == "adopt":
                        self.say(f"re-adopted: {s.provider} still running (pid {s.pid}, attempt {s.attempt})")
                    if s.phase == "starting":  # spawned, but the runner died before saying so
                        self._report_running()
            if self.mode != "finish":
                while not self._watch():
                    if self.runner.watcher.park(self):
                        idle = True  # this thread ends; the Watcher gives the run another when needed
                        return
                self._decide()
            self._finish()
        except LeaseLost as exc:
            self._stop_agent()
            self.runner.store.forget(s.id)
            self.say(f"lost its lease ({exc}); agent stopped, run forgotten")
        except RunnerRun:
            pass
        except ConnectionFailed:
            # Only while the runner stops (otherwise calls wait for the server): keep the state file.
            self._save(force=True)
        except Exception as exc:
            self.say(f"runner error: {type(exc).__name__}: {exc}")
            self._fail_quietly(f"runner error: {type(exc).__name__}: {exc}")
        finally:
            if not idle:
                if self.agent is not None:
                    self.agent.close()
                self.runner.unregister(s.id)
                self.ended.set()

    def _agent_client(self, key: str) -> Client:
        return self.runner.api.with_key(key, retry=API_RETRY)

    def _status(self, body: dict[str, Any], *, until_done: bool = False) -> dict[str, Any] | None:
        """POST the run's status. A lost lease raises LeaseLost; with ``until_done`` a network error is
        retried (the runner must not forget how a run ended because the server blinked)."""
        delay = 1.0
        while True:
            try:
                return self.runner.api.request("POST", f"runs/{self.state.id}/status/", json=body).json()
            except ConnectionFailed:
                if not until_done or self.runner.stop.is_set():
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 15)
            except SwitchyardError as exc:
                if is_lease_lost(exc):
                    raise LeaseLost(exc.message) from exc
                raise

    def _patiently(self, call):
        """``call()``, again after each network error until it goes through or the runner stops."""
        delay = 1.0
        while True:
            try:
                return call()
            except ConnectionFailed:
                if self.runner.stop.is_set():
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 15)

    def _start(self, *, resume: bool) -> None:
        s, a = self.state, self.state.assignment
        answer = self._status({"attempt": s.attempt, "status": "starting"}, until_done=True)
        s.attempt = int(answer.get("attempt") or s.attempt)
        s.session = str(answer.get("session") or "")
        s.agent_key = str(answer.get("agent_key") or "")
        s.phase = "starting"
        self.runner.store.save(s)
        if self.agent is not None:
            self.agent.close()
        self.agent = self._agent_client(s.agent_key)
        if not s.workdir or not os.path.isdir(s.workdir):
            self._patiently(self._prepare_workdir)
        prompt = resume_prompt(str(a.get("prompt") or ""), answer.get("resume"))
        use_resume = resume and s.agent_ran and self.provider is not None and self.provider.resume_command
        self._spawn(prompt, resume=bool(use_resume))
        # What the agent wrote while it started goes out first: the server takes a starting run's log,
        # and reporting `running` (a request and two state saves) would hold a fast writer's output back.
        self._ship()
        self._report_running()

    def _prepare_workdir(self) -> None:
        s, task = self.state, self.state.assignment.get("task") or {}
        repo = task.get("repository")
        hosted = self.runner.hosted(repo) if repo else None
        if hosted is not None:
            self._prepare_hosted_worktree(hosted, task)
        elif repo and repo.get("runner") is None and repo.get("path") and os.path.isdir(repo["path"]):
            kind = str(task.get("type") or "")
            kind = kind if _SLUG.fullmatch(kind) else "task"
            try:
                tree = self.agent.worktree_create(int(repo["id"]), type=kind, name=str(task["id"]))
                self.agent.worktree_claim(int(tree["id"]))
            except SwitchyardError as exc:
                raise RuntimeError(f"could not prepare the worktree of {repo.get('name')}: {exc}") from exc
            s.workdir, s.worktree_id = tree["path"], int(tree["id"])
        else:
            workspace = (self.agent.session_get(s.session).get("workspace") or {}).get("path")
            if workspace and os.path.isdir(workspace):
                s.workdir = workspace
            else:  # the server's files are on another machine: a folder of our own
                s.workdir = str(self.runner.root / "workdirs" / f"run-{s.id}")
                os.makedirs(s.workdir, exist_ok=True)
        s.base = _git_base(s.workdir)
        self.runner.store.save(s)

    def _prepare_hosted_worktree(self, hosted: HostedRepository, task: dict[str, Any]) -> None:
        """The task's worktree beside this runner's clone: made here, registered with the runner's
        key, claimed with the run's agent key (the monitor shows its holder)."""
        s = self.state
        kind = str(task.get("type") or "")
        kind = kind if _SLUG.fullmatch(kind) else "task"
        try:
            path = worktree_add(hosted, f"{kind}-{task['id']}")
            body = {"repository": hosted.id, "type": kind, "name": str(task["id"])}
            tree = self.runner.api.request("POST", "runners/me/worktrees/", json=body).json()
            self.agent.worktree_claim(int(tree["id"]))
        except ConnectionFailed:
            raise  # _patiently tries again: every step above is idempotent
        except (GitError, SwitchyardError) as exc:
            raise RuntimeError(f"could not prepare the worktree of {hosted.name}: {exc}") from exc
        s.workdir, s.worktree_id = path, int(tree["id"])
        self.runner.reported_at = 0.0  # the monitor hears of it with the next heartbeat

    def _spawn(self, prompt: str, *, resume: bool) -> None:
        s, a, provider = self.state, self.state.assignment, self.provider
        if provider is None:
            raise RuntimeError(f"this runner has no provider {s.provider!r}")
        task = a.get("task") or {}
        template = provider.resume_command if resume else provider.command
        values = template_values(
            prompt=prompt, session_id=s.session, workdir=s.workdir, run_id=s.id, task_id=task.get("id")
        )
        argv = render(template, values)
        if not s.log_path:
            stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
            s.log_path = str(self.runner.jobs / f"job-{stamp}-{s.id}.log")
            s.exit_path = str(self.runner.store.folder / f"{s.id}.exit")
        hook_dir = self.runner.store.folder / f"{s.id}.hook"
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("SWITCHYARD_RUNNER_KEY", "SWITCHYARD_KEY", "SWITCHYARD_SESSION")
        }
        env.update(provider.env)
        # Claude Code's telemetry (tokens and cost per request, README "Tokens and cost") goes to the
        # server's OTLP receiver with the run's key; a provider's own env table may send it elsewhere.
        telemetry = {
            "CLAUDE_CODE_ENABLE_TELEMETRY": "1",
            "OTEL_LOGS_EXPORTER": "otlp",
            "OTEL_METRICS_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
            "OTEL_EXPORTER_OTLP_ENDPOINT": self.runner.config.url.rstrip("/").removesuffix("/api/v1") + "/api/v1/otlp",
            "OTEL_EXPORTER_OTLP_HEADERS": f"Authorization=Bearer {s.agent_key}",
        }
        env.update({name: value for name, value in telemetry.items() if name not in provider.env})
        env.update(
            SWITCHYARD_URL=self.runner.config.url,
            SWITCHYARD_SESSION=s.session,
            SWITCHYARD_KEY=s.agent_key,
            SWITCHYARD_RUN=str(s.id),
            SWITCHYARD_ATTEMPT=str(s.attempt),
            SWITCHYARD_TASK=str(task.get("id") or ""),
            SWITCHYARD_TASK_TITLE=str(task.get("title") or ""),
            SWITCHYARD_TASK_DESCRIPTION=str(task.get("description") or ""),
            SWITCHYARD_WORKDIR=s.workdir,
            SWITCHYARD_PROMPT=prompt,
            # The hook's spool and memory per run: a spooled request is replayed with this run's key only.
            SWITCHYARD_STATE_DIR=str(hook_dir),
        )
        self.popen = spawn(argv, cwd=s.workdir, env=env, log_path=Path(s.log_path), exit_path=Path(s.exit_path))
        s.pid, s.pid_start = self.popen.pid, pid_start_time(self.popen.pid)
        s.started_at, s.agent_ran, s.exit_code = time.time(), True, None
        self.runner.store.save(s)
        title = task.get("title") or ""
        self.say(
            f"started: {s.provider} on task {task.get('id')} {title[:60]!r} (attempt {s.attempt}, pid {s.pid})"
            f"{' resuming' if resume else ''} in {s.workdir}"
        )

    def _report_running(self) -> None:
        s = self.state
        log = os.path.relpath(s.log_path, self.runner.root) if s.log_path else ""
        body = {"attempt": s.attempt, "status": "running", "pid": s.pid, "workdir": s.workdir, "log_path": log}
        try:
            self._status(body, until_done=True)
        except SwitchyardError as exc:
            if exc.status != 409:  # already running (a re-adopted run that had reported it)
                raise
        s.phase = "running"
        self.runner.store.save(s)

    # --- watching -----------------------------------------------------------------------------------------
    def _alive(self) -> bool:
        s = self.state
        if self.popen is not None:
            return self.popen.poll() is None
        return same_process(s.pid, s.pid_start)

    def _exited(self) -> bool:
        s = self.state
        if s.pid is None:
            return True
        if self.popen is not None:
            code = self.popen.poll()
            if code is None:
                return False
            s.exit_code = code
            return True
        if same_process(s.pid, s.pid_start):
            return False
        s.exit_code = read_exit_file(s.exit_path)
        return True

    def _watch(self) -> bool:
        """Ship, check, wait, until the run is over (True: decide how it ended) or idle (False: for
        the Watcher). A drop or a runner stop that leaves the agent running raises RunnerRun."""
        s = self.state
        timeout = self.provider.timeout_seconds if self.provider else None
        idle, seen = 0, s.shipped
        while True:
            done = self._exited()
            self._ship()
            idle, seen = (idle + 1, seen) if s.shipped == seen else (0, s.shipped)
            if done:
                return True
            if self.dropped:
                self._stop_agent()
                self.runner.store.forget(s.id)
                self.say("dropped by the server; agent stopped")
                raise RunnerRun()
            if self.cancelled:
                self._stop_agent()
                s.outcome = "cancelled"
                return True
            if timeout and s.started_at and time.time() - s.started_at > timeout:
                self._stop_agent()
                s.outcome, s.error = "failed", f"timed out after {timeout:g} s"
                return True
            if self.runner.stop.is_set():
                if self.runner.on_exit == "stop":
                    self._stop_agent()
                    s.outcome, s.error = "failed", f"runner {self.runner.config.name} was stopped"
                    return True
                self._save(force=True)
                raise RunnerRun()
            if idle == 0 and self._backlog() >= BURST_BYTES:
                continue
            if idle >= IDLE_TICKS and self._quiet():
                return False
            # Not quiet while idle: the server did not take the log or its events; try again each second.
            self.wake.wait(IDLE_TICK if idle >= IDLE_TICKS else TICK)
            self.wake.clear()

    def _quiet(self) -> bool:
        """Nothing to send: the log has not grown past what was shipped, and its events are sent."""
        s = self.state
        parses = self.provider is not None and self.provider.output in ("stream-json", "jsonl")
        return self._backlog() <= 0 and not (parses and self.agent is not None and s.parsed < s.shipped)

    def _backlog(self) -> int:
        """Bytes of the job log not shipped yet."""
        s = self.state
        try:
            return os.stat(s.log_path).st_size - s.shipped if s.log_path and s.session else 0
        except OSError:
            return 0

    def _stop_agent(self) -> None:
        s = self.state
        if s.pid is None or not self._alive():
            return
        reap = self.popen.poll if self.popen is not None else None
        stop_group(s.pid, grace=self.runner.config.grace_seconds, reap=reap)

    def _save(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self.saved_at >= STATE_SAVE_EVERY:
            self.runner.store.save(self.state)
            self.saved_at = now

    def _ship(self, *, final: bool = False) -> None:
        """Send the log's new bytes, then the stream events of its new lines. A network error leaves
        the offsets where they were, to be tried again on the next tick."""
        s = self.state
        if not s.log_path or not s.session:
            return

        def send(offset: int, length: int, body) -> dict[str, Any]:
            params = {"offset": offset, "attempt": s.attempt}
            # A Content-Length, not chunked: the server refuses an oversized body before reading it.
            headers = {"Content-Type": "application/octet-stream", "Content-Length": str(length)}
            path = f"runs/{s.id}/log/"
            return self.runner.api.request("POST", path, content_stream=body, params=params, headers=headers).json()

        try:
            shipped = ship_log(send, s.log_path, s.shipped)
        except ConnectionFailed:
            return
        except SwitchyardError as exc:
            if exc.status == 403 or exc.status == 404:
                raise LeaseLost(exc.message) from exc
            return
        changed = shipped != s.shipped
        s.shipped = shipped
        if self.provider is not None and self.provider.output in ("stream-json", "jsonl"):
            before = s.parsed
            # While running, a slice per tick; at the end, all of it.
            while self._events(final=final) and final and s.parsed < s.shipped:
                pass
            changed |= s.parsed != before
        if changed:
            self._save(force=final)

    def _events(self, *, final: bool) -> bool:
        s = self.state
        if self.agent is None or s.parsed >= s.shipped:
            return False
        with open(s.log_path, "rb") as fh:
            fh.seek(s.parsed)
            data = fh.read(min(s.shipped - s.parsed, PARSE_MAX))
        events, used, lines = parse_lines(
            data,
            start_line=s.parsed_lines,
            provider=s.provider,
            hooks=bool(self.provider and self.provider.hooks),
            run_id=s.id,
            # A slice with no end of line in it is one giant line: take it whole (not JSON we can use)
            # rather than wait for a newline forever.
            final=(final and s.parsed + len(data) >= s.shipped) or (len(data) == PARSE_MAX and b"\n" not in data),
        )
        for start in range(0, len(events), EVENTS_PER_BATCH):
            try:
                self.agent.events_append(s.session, events[start : start + EVENTS_PER_BATCH])
            except ConnectionFailed:
                return False  # the same lines are read again next tick: same ids, nothing doubled
            except SwitchyardError:
                break  # refused (the key was revoked, a payload too big): drop these, go on
        s.parsed += used
        s.parsed_lines += lines
        return used > 0

    # --- the end ------------------------------------------------------------------------------------------
    def _decide(self) -> None:
        s = self.state
        if not s.outcome:
            if s.exit_code == 0:
                s.outcome = "succeeded"
            else:
                s.outcome, s.error = "failed", describe_exit(s.exit_code)
        s.phase = "finishing"
        self.runner.store.save(s)

    def _finish(self) -> None:
        s = self.state
        self._ship(final=True)
        body: dict[str, Any] = {"attempt": s.attempt, "status": s.outcome}
        if s.exit_code is not None and s.exit_code >= 0:
            body["exit_code"] = s.exit_code
        summary = self._summary() if s.outcome in ("succeeded", "failed") else None
        if summary is not None:
            body["summary"] = summary
        if s.outcome == "failed":
            tail = last_lines(s.log_path, 20)
            body["error"] = f"{s.error}\n{tail}".strip() if tail else s.error
        if s.worktree_id and self.agent is not None:
            # Not held any more (the lease lapsed) is fine: nothing to give back.
            with contextlib.suppress(SwitchyardError):
                self.agent.worktree_release(s.worktree_id)
        try:
            self._status(body, until_done=True)
        except SwitchyardError as exc:
            if exc.status != 409:
                raise
            self.say(f"the server would not take {s.outcome}: {exc}")
        with contextlib.suppress(LeaseLost):
            self._ship(final=True)  # anything the agent's children wrote after the last tick
        self.runner.store.forget(s.id)
        if s.worktree_id:
            self.runner.reported_at = 0.0  # the worktree monitor hears how the agent left it
        took = time.monotonic() - self.begun
        detail = describe_exit(s.exit_code) if s.outcome != "cancelled" else "stopped"
        if s.outcome == "failed" and s.error and not s.error.startswith(("exit code", "killed")):
            detail = s.error
        if summary:
            detail += f"; {summary['commits_ahead']} commit(s), {len(summary['files_changed'])} file(s) changed"
        self.say(f"{s.outcome} after {took:.1f} s ({detail})")

    def _summary(self) -> dict[str, Any] | None:
        s = self.state
        if not s.base or not s.workdir or not os.path.isdir(s.workdir):
            return None
        try:
            changes = changes_since(s.workdir, s.base, leave_out=self._sync_links())
        except (GitError, ValueError) as exc:
            self.say(f"could not read the changes: {exc}")
            return None
        summary: dict[str, Any] = {
            "commits_ahead": changes.commits_ahead,
            "files_changed": changes.files_changed[:500],
            "artifacts": [],
        }
        if changes.patch and self.agent is not None and s.session:
            name = f"run-{s.id}.patch"
            try:
                self.agent.file_put(s.session, name, changes.patch)
                summary["patch"] = name
                summary["artifacts"].append(name)
            except SwitchyardError as exc:
                self.say(f"could not upload {name}: {exc}")
        return summary

    def _sync_links(self) -> list[str]:
        """The links of the repository's sync folder in a worktree workdir: left out of the summary."""
        repo = (self.state.assignment.get("task") or {}).get("repository")
        if not self.state.worktree_id or not repo or not repo.get("path"):
            return []
        clone = HostedRepository(name=str(repo["name"]), path=str(repo["path"]), default_branch="")
        return sync_links_in(clone, self.state.workdir)

    def _fail_quietly(self, error: str) -> None:
        s = self.state
        self._stop_agent()
        body = {"attempt": s.attempt, "status": "failed", "error": error[:4000]}
        with contextlib.suppress(SwitchyardError, LeaseLost):
            self._status(body)
        self.runner.store.forget(s.id)


def _git_base(workdir: str) -> str:
    """HEAD of ``workdir`` when it is a git checkout of its own (not a folder inside someone
    else's repository, like a session workspace under a project), else ''."""
    try:
        top = git(workdir, "rev-parse", "--show-toplevel", check=False).strip()
        if not top or os.path.realpath(top) != os.path.realpath(workdir):
            return ""
        return head(workdir)
    except GitError:
        return ""


def main(config: RunnerConfig, providers: dict[str, ProviderConfig], *, on_exit: str = "leave") -> int:
    runner = Runner(config, providers, on_exit=on_exit)
    signal.signal(signal.SIGTERM, runner.request_stop)
    signal.signal(signal.SIGINT, runner.request_stop)
    return runner.run()
