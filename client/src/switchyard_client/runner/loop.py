"""`switchyard runner`: ask Switchyard for runs, start the agents, ship their logs, report how they ended.

Threads: the main one heartbeats (every ``heartbeat_seconds`` the server asks for) and reports the
runs held; one long-polls ``/runners/me/next/`` for work and cancels; one per run starts it, watches
its agent while its log grows and finishes it (see RunWorker, worker.py); one watches all the idle
runs (see Watcher, watcher.py). What each run needs after a crash is in ``<root>/runs/<id>.json``
(state.py): a restarted runner asks the server which runs it still holds, re-adopts agents
that are still alive, and resumes the others with a new attempt.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from typing import Any, TextIO

from switchyard_client import __version__
from switchyard_client.api.client import Client
from switchyard_client.api.errors import ConnectionFailed, SwitchyardError
from switchyard_client.runner.config import ProviderConfig, RunnerConfig, RunnerConfigError
from switchyard_client.runner.console import Console
from switchyard_client.runner.git import GitError
from switchyard_client.runner.otlp_relay import OtlpRelay
from switchyard_client.runner.process import fenced_kill, read_exit_file, stop_group
from switchyard_client.runner.repos import REPORT_EVERY, HostedRepository, repository_check
from switchyard_client.runner.repos import reports as worktree_reports
from switchyard_client.runner.repos import worktree_remove as hosted_worktree_remove
from switchyard_client.runner.room import Room, RoomKeeper, load_1m
from switchyard_client.runner.sandbox import bwrap_problem
from switchyard_client.runner.state import RunState, StateStore, same_process
from switchyard_client.runner.watchdog import lease_forget, lease_path, lease_write, watchdog_stop
from switchyard_client.runner.watcher import Watcher
from switchyard_client.runner.worker import API_RETRY, RunWorker

POLL_WAIT = 25
ROOM_POLL_WAIT = 2  # while a provider lacks memory: ask again soon with what has freed meanwhile
# How long a run the server says we hold, but we know nothing of, is tolerated before it is handed back:
# the long poll's answer that carries its assignment may still be on its way (the server commits the
# assignment, then answers). A time, not a number of heartbeats: heartbeats come every second under a
# short lease, and a poll answer slowed by a busy machine outlived two of them.
UNKNOWN_GRACE_SECONDS = 10.0


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
        # This process, for the server: a long poll the last runner process left open hands out nothing.
        self.instance = uuid.uuid4().hex
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
        self.lease_seconds = 60.0  # the server's RUNNER_LEASE_SECONDS, as its heartbeat answers say
        # (run id, attempt) held by us on the server and unknown here -> when a heartbeat first said so
        self.unknown: dict[tuple[int, int], float] = {}
        self.online: bool | None = None
        self.repos: list[HostedRepository] = []  # the clones on this machine, once registered
        self.reported_at = 0.0  # when the worktrees were last reported (0: with the next heartbeat)
        self.renewed_at = 0.0  # when the last heartbeat the server answered was sent
        self.watcher = Watcher(self.stop)
        self.room = RoomKeeper(
            min_free_mb=config.min_free_memory_mb,
            needs_mb={name: int(p.memory_mb or 0) for name, p in providers.items()},
        )
        self.short_said: list[str] = []  # the providers last said to lack room
        # The agents' OTLP exports go through it: on disk before they are answered (otlp_relay.py), by
        # a keeper process that outlives this one (otlp_keeper.py).
        self.relay = OtlpRelay(
            self.root,
            api=self.api,
            key_for_run=self._key_of_run,
            run_for_key=self._run_of_key,
            say=self.console.say,
            keeper=True,
        )

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
            "instance": self.instance,
            "draining": False,
            "runs": runs,
            "load": load_1m(),
        }
        room = self._room()
        if room is not None:
            body["room"] = room.room
            body["memory"] = room.report()
        if self.repos and time.monotonic() - self.reported_at >= REPORT_EVERY:
            body["worktrees"] = worktree_reports(self.repos)
            self.reported_at = time.monotonic()
        sent_at = time.time()  # the server renews the leases after this moment
        try:
            answer = self.api.request("POST", "runners/me/heartbeat/", json=body).json()
        except ConnectionFailed as exc:
            self._reachable(False, exc.message)
            return None
        self._reachable(True)
        self.heartbeat_seconds = float(answer.get("heartbeat_seconds") or 10)
        self.lease_seconds = float(answer.get("lease_seconds") or 60)
        self.renewed_at = sent_at
        self._renew(answer.get("held") or [], sent_at)
        self._cancel(answer.get("cancel") or [])
        for run_id in answer.get("dropped") or []:
            worker = self.workers.get(run_id)
            # Only the attempt we reported: a run that just restarted (attempt + 1) is still ours.
            if worker and worker.state.attempt == reported.get(run_id):
                worker.drop()
        self._unknown_held(answer.get("held") or [])
        self._remove_worktrees(answer.get("remove_worktrees") or [])
        return answer

    def lease_renew(self, state: RunState, sent_at: float) -> None:
        """Tell the run's watchdog (watchdog.py) its lease lasts until ``sent_at`` + the lease."""
        path = lease_path(self.store.folder, state.id)
        lease_write(path, sent_at=sent_at, lease_seconds=self.lease_seconds, grace=self.config.grace_seconds)

    def _renew(self, held: list[dict[str, Any]], sent_at: float) -> None:
        """The started runs this heartbeat renewed on the server, with the attempt each worker holds."""
        with self.lock:
            workers = dict(self.workers)
        for item in held:
            worker = workers.get(item["id"])
            if worker and worker.state.attempt == item["attempt"] and item.get("status") in ("starting", "running"):
                self.lease_renew(worker.state, sent_at)

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
        way, or our state file is gone): once that assignment is UNKNOWN_GRACE_SECONDS old as this
        runner has seen it, end it failed rather than holding it (and renewing its lease) forever.
        Its age is counted per attempt: one handed back and handed to us again starts afresh."""
        with self.lock:
            known = set(self.workers)
        now = time.monotonic()
        seen: dict[tuple[int, int], float] = {}
        for item in held:
            run_id, attempt = item["id"], int(item["attempt"])
            if run_id in known:
                continue
            first_seen = seen[(run_id, attempt)] = self.unknown.get((run_id, attempt), now)
            if now - first_seen < UNKNOWN_GRACE_SECONDS:
                continue
            body = {
                "attempt": attempt,
                "status": "failed",
                "error": f"runner {self.config.name} lost track of this run (no local state); queue it again",
            }
            try:
                answer = self.api.request("POST", f"runs/{run_id}/status/", json=body).json()
                # The server queues a run never started again (its acknowledgement rule), attempt + 1. The
                # answer shows the run as it is now: a poll of ours may already hold it again (assigned),
                # so the attempt, not the status, says whether it went back.
                run = answer.get("run") or {}
                requeued = int(run.get("attempt") or 0) > attempt
                outcome = "handed back, queued again" if requeued else run.get("status") or "failed"
                self.console.say(f"run {run_id}: this runner had no record of it; {outcome}")
            except (SwitchyardError, ValueError):
                continue  # tried again at the next heartbeat
            del seen[(run_id, attempt)]
        self.unknown = seen

    # --- runs -----------------------------------------------------------------------------------------
    def _key_of_run(self, run_id: int) -> str | None:
        with self.lock:
            worker = self.workers.get(run_id)
        if worker is None:
            return None
        return worker.state.agent_key or None

    def _run_of_key(self, key: str) -> int | None:
        with self.lock:
            return next((w.state.id for w in self.workers.values() if key and w.state.agent_key == key), None)

    def register(self, worker: RunWorker) -> None:
        with self.lock:
            self.workers[worker.state.id] = worker
        worker.start()

    def unregister(self, run_id: int) -> None:
        with self.lock:
            self.workers.pop(run_id, None)
        self.room.release(run_id)

    def _room(self) -> Room | None:
        """The machine's room now (room.py); says when a provider comes to lack it or has it again."""
        room = self.room.look()
        short = room.short() if room is not None else []
        if short != self.short_said:
            for name in short:
                if name not in self.short_said:
                    self.console.say(
                        f"no memory for another {name} run: it needs {room.needs_mb[name]} MB, "
                        f"{max(0, room.spare_mb)} MB to spare ({room.memory.available_mb} MB available, "
                        f"{room.min_free_mb} MB kept free, {room.reserved_mb} MB held for runs just started); "
                        "its runs stay queued"
                    )
            if not short:
                self.console.say("memory for every provider again")
            self.short_said = short
        return room

    def accept(self, assignment: dict[str, Any]) -> None:
        run_id = int(assignment["id"])
        with self.lock:
            if run_id in self.workers:
                return
        state = RunState(
            id=run_id, attempt=int(assignment["attempt"]), provider=str(assignment["provider"]), assignment=assignment
        )
        self.store.save(state)
        self.room.reserve(run_id, state.provider)
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
        self._labels_check(answer)
        held = {item["id"]: item for item in answer.get("held") or []}
        dropped = set(answer.get("dropped") or [])
        for state in states:
            item = held.get(state.id)
            alive = same_process(state.pid, state.pid_start)
            if item is None or state.id in dropped or int(item["attempt"]) != state.attempt:
                if alive:
                    stop_group(state.pid, grace=self.config.grace_seconds)
                fenced_kill(state.fence)  # what left the agent's group, also when the agent is gone
                if same_process(state.watchdog_pid, state.watchdog_start):
                    watchdog_stop(state.watchdog_pid)
                lease_forget(lease_path(self.store.folder, state.id))
                self.store.forget(state.id)
                self.console.say(f"run {state.id} is no longer ours; forgotten{' (agent stopped)' if alive else ''}")
                continue
            if state.phase == "finishing":
                mode = "finish"
            elif alive:
                mode = "adopt"
                self.lease_renew(state, self.renewed_at)  # before its watchdog's deadline, if within the lease
            elif state.pid is not None:
                code = read_exit_file(state.exit_path)
                # Exited on its own while nobody watched: report that. Killed (no code, or 128+N): resume.
                mode = "exited" if code is not None and code < 128 else "resume"
            elif item.get("status") == "assigned":
                mode = "new"
            else:
                mode = "resume"
            if mode in ("new", "resume"):
                self.room.reserve(state.id, state.provider)  # an agent about to start, as in accept()
            self.register(RunWorker(self, state, mode))
            if item.get("cancel"):
                self.workers[state.id].cancel()
        return True

    def poll_loop(self) -> None:
        while not self.stop.is_set():
            body: dict[str, Any] = {"wait": POLL_WAIT, "instance": self.instance}
            room = self._room()
            if room is not None:
                # The server hands out no more than this; while some provider lacks it, ask again soon.
                body["room"] = room.room
                if room.short():
                    body["wait"] = ROOM_POLL_WAIT
            try:
                response = self.poll_api.request("POST", "runners/me/next/", json=body, idempotent=False)
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

    def _labels_check(self, answer: dict[str, Any]) -> None:
        """Say which configured labels the server ignores: a runner's labels are its key's."""
        granted = (answer.get("runner") or {}).get("labels")
        missing = [label for label in self.config.labels if isinstance(granted, list) and label not in granted]
        if missing:
            self.console.say(
                f"labels {', '.join(missing)} ignored: this runner's labels are its key's "
                f"({', '.join(granted) or 'none'}); give it more with "
                f"`manage.py create_runner_key {self.config.name} --label ...` on the server"
            )

    def _sandbox_line(self) -> str:
        """Said once at start: whether agents run in a sandbox here, and if not, why."""
        if self.config.sandbox is False:
            return "sandbox off ([runner] sandbox = false)"
        problem = bwrap_problem()
        if problem is None:
            return "agents sandboxed with bubblewrap"
        if self.config.sandbox == "if-available":
            return f"agents NOT sandboxed: {problem}"
        return f"runs will fail until a sandbox can be made: {problem} (or set [runner] sandbox = false)"

    def run(self) -> int:
        names = ", ".join(self.providers) or "none"
        # First: what was spooled before a restart goes out, and re-adopted agents export to it.
        self.relay.start()
        self.console.say(
            f"serving {self.config.url} with providers {names}; capacity {self.config.capacity}; "
            f"labels {', '.join(self.config.labels) or 'none'}; files in {self.root}; "
            f"telemetry relay {self.relay.endpoint}; {self._sandbox_line()}"
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
        # At least three heartbeats a lease: the agents' watchdogs stop them when one is not renewed.
        while not self.stop.wait(min(self.heartbeat_seconds, self.lease_seconds / 3)):
            try:
                self.heartbeat()
            except SwitchyardError as exc:
                self.console.say(f"heartbeat refused: {exc}")
            try:
                self.relay.ensure()
            except (OSError, RuntimeError) as exc:
                self.console.say(f"telemetry relay: {exc}")
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
        self.relay.stop()  # what it has not forwarded stays spooled for the next start
        self.api.close()

    def request_stop(self, *_: object) -> None:
        self.stop.set()


def main(config: RunnerConfig, providers: dict[str, ProviderConfig], *, on_exit: str = "leave") -> int:
    runner = Runner(config, providers, on_exit=on_exit)
    signal.signal(signal.SIGTERM, runner.request_stop)
    signal.signal(signal.SIGINT, runner.request_stop)
    return runner.run()
