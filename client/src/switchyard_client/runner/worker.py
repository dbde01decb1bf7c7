"""A run's own thread (RunWorker): it starts the run's agent, watches it while its log grows, and
reports how it ended. What it calls on the way: workdir.py (where the agent works), agent_env.py
(its environment), logship.py (its log and events to the server), summary.py (what it changed)."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import threading
import time
from pathlib import Path
from typing import Any

from switchyard_client.api.client import Client
from switchyard_client.api.errors import ConnectionFailed, SwitchyardError
from switchyard_client.api.retry import RetryPolicy
from switchyard_client.runner.agent_env import agent_env
from switchyard_client.runner.deferral import defer_env, deferred_tool_use, parked_log
from switchyard_client.runner.host import Host
from switchyard_client.runner.launch import launch_plan, own_agent_session
from switchyard_client.runner.logship import (
    AGENT_SESSION,
    LeaseLost,
    is_lease_lost,
    last_lines,
    run_events_ship,
    run_log_ship,
)
from switchyard_client.runner.process import describe_exit, fenced_kill, read_exit_file, spawn, stop_group
from switchyard_client.runner.providers import render, template_values
from switchyard_client.runner.review_guard import review_commits_refused, review_git_env
from switchyard_client.runner.sandbox_run import sandbox_wanted, sandboxed_argv
from switchyard_client.runner.state import RunState, pid_start_time, same_process
from switchyard_client.runner.summary import run_summary
from switchyard_client.runner.watchdog import fired_path, lease_forget, lease_path, watchdog_start, watchdog_stop
from switchyard_client.runner.watcher import IDLE_TICK, IDLE_TICKS
from switchyard_client.runner.workdir import workdir_prepare

TICK = 0.2  # how often a run's log is shipped while it grows, and its agent checked
# After a tick that shipped, at least this much written meanwhile (a burst still being written, as a
# `cat` of a big file) is shipped at once instead of after the next tick.
BURST_BYTES = 1024 * 1024
STATE_SAVE_EVERY = 1.0
API_RETRY = RetryPolicy(attempts=3, base_delay=0.2, max_delay=2.0)


class RunnerRun(Exception):
    """Ends a run's thread without reporting anything (dropped, detached)."""


class RunWorker:
    """One run, from `starting` to its final status: in a thread of its own while it starts, while
    its log grows and while it finishes; an idle run is the Watcher's until it has something to do."""

    def __init__(self, runner: Host, state: RunState, mode: str):
        self.runner = runner
        self.state = state
        self.mode = mode  # new, resume, adopt, exited, finish
        self.provider = runner.providers.get(state.provider)
        # Flags, not Events: ``wake`` does the waking, and an Event costs ~1.2 KB.
        self.cancelled = False
        self.dropped = False
        self.wake = threading.Event()
        self.popen = None
        self.watchdog = None  # the watchdog's Popen, when this runner started it
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
                        self._watchdog_ensure()
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
            self._forget()
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
        s = self.state
        sent_at = time.time()  # `starting` renews the lease from a moment after this
        answer = self._status({"attempt": s.attempt, "status": "starting"}, until_done=True)
        self.runner.lease_renew(s, sent_at)
        s.attempt = int(answer.get("attempt") or s.attempt)
        s.session = str(answer.get("session") or "")
        s.agent_key = str(answer.get("agent_key") or "")
        s.phase = "starting"
        self.runner.store.save(s)
        if self.agent is not None:
            self.agent.close()
        self.agent = self._agent_client(s.agent_key)
        if not s.workdir or not os.path.isdir(s.workdir):
            self._patiently(lambda: workdir_prepare(s, host=self.runner, agent=self.agent))
        parked_log(s, root=self.runner.root, exit_folder=self.runner.store.folder)  # an answered waiting run
        if self.provider is None:
            raise RuntimeError(f"this runner has no provider {s.provider!r}")
        plan = launch_plan(
            s,
            self.provider,
            runner_name=self.runner.config.name,
            restart=resume and s.agent_ran,
            packet=answer.get("resume"),
        )
        self._spawn(plan.prompt, resume=plan.resume, agent_session=plan.agent_session)
        # What the agent wrote while it started goes out first: the server takes a starting run's log,
        # and reporting `running` (a request and two state saves) would hold a fast writer's output back.
        self._ship()
        self._report_running()

    def _spawn(self, prompt: str, *, resume: bool, agent_session: str = "") -> None:
        s, a, provider = self.state, self.state.assignment, self.provider
        if provider is None:
            raise RuntimeError(f"this runner has no provider {s.provider!r}")
        task = a.get("task") or {}
        template = provider.resume_command if resume else provider.command
        values = template_values(
            prompt=prompt,
            session_id=s.session,
            workdir=s.workdir,
            run_id=s.id,
            task_id=task.get("id"),
            agent_session=agent_session,
            resuming=resume,
        )
        argv = render(template, values)
        if not s.log_path:
            stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
            s.log_path = str(self.runner.jobs / f"job-{stamp}-{s.id}.log")
            s.exit_path = str(self.runner.store.folder / f"{s.id}.exit")
        hook_dir = self.runner.store.folder / f"{s.id}.hook"
        s.fence = os.urandom(12).hex()
        env = agent_env(
            s,
            provider=provider,
            url=self.runner.config.url,
            otlp_endpoint=self.runner.relay.endpoint,
            prompt=prompt,
            hook_dir=hook_dir,
        )
        env["SWITCHYARD_RUN_KIND"] = str(a.get("kind") or "work")
        env.update(defer_env(argv, provider=provider, assignment=a))  # a hook that needs a person defers
        if a.get("kind") == "review":
            env.update(review_git_env(self.runner.root, env))  # git refuses its commits and pushes
        # Raises SandboxUnavailable (the run fails with its reason) when a sandbox is required and cannot be made.
        s.sandboxed = sandbox_wanted(self.runner.config, provider)
        if s.sandboxed:
            argv = sandboxed_argv(
                argv,
                state=s,
                config=self.runner.config,
                provider=provider,
                repos=self.runner.repos,
                env=env,
                hook_dir=hook_dir,
            )
        self._watchdog_stop()  # a resumed run's old one, if it still waits for a deadline
        given = prompt.encode() if provider.prompt_stdin else None  # the prompt as data, never an option
        self.popen = spawn(
            argv, cwd=s.workdir, env=env, log_path=Path(s.log_path), exit_path=Path(s.exit_path), stdin=given
        )
        s.pid, s.pid_start = self.popen.pid, pid_start_time(self.popen.pid)
        s.started_at, s.agent_ran, s.exit_code, s.agent_error = time.time(), True, None, ""
        # Until its output names it: the one resumed, or the one its command set.
        s.agent_session = agent_session if resume else own_agent_session(s, provider)
        self._watchdog_ensure(save=False)
        self.runner.store.save(s)
        title = task.get("title") or ""
        self.say(
            f"started: {s.provider} on task {task.get('id')} {title[:60]!r} (attempt {s.attempt}, pid {s.pid})"
            f"{' resuming' if resume else ''} in {s.workdir}{' (sandboxed)' if s.sandboxed else ''}"
        )

    def _report_running(self) -> None:
        s = self.state
        log = os.path.relpath(s.log_path, self.runner.root) if s.log_path else ""
        body = {
            "attempt": s.attempt,
            "status": "running",
            "pid": s.pid,
            "workdir": s.workdir,
            "log_path": log,
            "sandboxed": s.sandboxed,
        }
        body.update(self._agent_session_report())
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
                self._forget()
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
        if s.pid is not None and self._alive():
            reap = self.popen.poll if self.popen is not None else None
            stop_group(s.pid, grace=self.runner.config.grace_seconds, reap=reap)
        fenced_kill(s.fence)  # what left the group (setsid, a detached spawn) but carries the mark

    # --- the watchdog (watchdog.py) ------------------------------------------------------------------------
    def _watchdog_ensure(self, *, save: bool = True) -> None:
        """Start the agent's watchdog unless the one in the state file still runs (it outlived a
        runner). The lease file is written by then: by `starting`, or by the restarted runner's
        first heartbeat."""
        s = self.state
        if s.pid is None or same_process(s.watchdog_pid, s.watchdog_start):
            return
        self.watchdog = watchdog_start(lease_path(self.runner.store.folder, s.id), s.pid, s.fence)
        s.watchdog_pid, s.watchdog_start = self.watchdog.pid, pid_start_time(self.watchdog.pid)
        if save:
            self.runner.store.save(s)

    def _watchdog_stop(self) -> None:
        s = self.state
        if s.watchdog_pid is not None and (self.watchdog is not None or same_process(s.watchdog_pid, s.watchdog_start)):
            watchdog_stop(s.watchdog_pid, self.watchdog)
        self.watchdog = None
        s.watchdog_pid = s.watchdog_start = None

    def _forget(self) -> None:
        """The run is over here: its watchdog, lease file and state file go."""
        self._watchdog_stop()
        lease_forget(lease_path(self.runner.store.folder, self.state.id))
        self.runner.store.forget(self.state.id)

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
        shipped = run_log_ship(s, self.runner.api)
        if shipped is None:
            return
        changed = shipped != s.shipped
        s.shipped = shipped
        if self.provider is not None and self.provider.output in ("stream-json", "jsonl"):
            before, known = s.parsed, s.agent_session
            hooks = bool(self.provider and self.provider.hooks)
            # While running, a slice per tick; at the end, all of it.
            while run_events_ship(s, self.agent, hooks=hooks, final=final) and final and s.parsed < s.shipped:
                pass
            changed |= s.parsed != before
            if s.agent_session != known:
                # Saved at once: a runner killed now must resume this session (Codex's by its id).
                self._save(force=True)
                return
        if changed:
            self._save(force=final)

    # --- the end ------------------------------------------------------------------------------------------
    def _decide(self) -> None:
        s = self.state
        if not s.outcome:
            parked = (
                deferred_tool_use(s.log_path) if s.exit_code == 0 and self.provider and self.provider.hooks else None
            )
            if parked is not None:
                s.outcome, s.deferred = "waiting", parked  # its hook deferred a call to a person
            elif s.exit_code == 0:
                s.outcome = "succeeded"
            elif fired_path(lease_path(self.runner.store.folder, s.id)).exists():
                s.outcome = "failed"
                s.error = f"{describe_exit(s.exit_code)}: stopped by its watchdog, the lease was not renewed in time"
            else:
                s.outcome, s.error = "failed", describe_exit(s.exit_code)
        s.phase = "finishing"
        self.runner.store.save(s)

    def _finish(self) -> None:
        s = self.state
        if s.outcome == "waiting" and self._park():
            return
        self._ship(final=True)
        body: dict[str, Any] = {"attempt": s.attempt, "status": s.outcome, **self._agent_session_report()}
        if s.assignment.get("kind") == "review" and s.outcome in ("succeeded", "failed"):
            refused = review_commits_refused(s.workdir, s.base)
            if refused:
                s.outcome, s.error = "failed", f"{refused}; {s.error}" if s.error else refused
                body["status"] = "failed"
                self.say(refused)
        if s.exit_code is not None and s.exit_code >= 0:
            body["exit_code"] = s.exit_code
        summary = run_summary(s, agent=self.agent, say=self.say) if s.outcome in ("succeeded", "failed") else None
        if summary is not None:
            body["summary"] = summary
        if s.outcome == "failed" and s.agent_error and s.agent_error not in s.error:
            # The agent ended itself and said why (Codex's "unexpected status 401 ...", Gemini's API
            # error): its words lead. Its exit code is then no signal's (Gemini CLI exits with an API
            # error's HTTP status: 401 is exit code 145, not SIGCHLD).
            said = f"exit code {s.exit_code}" if s.error == describe_exit(s.exit_code) else s.error
            s.error = f"{said}: {s.agent_error}"
        if s.outcome == "failed":
            tail = last_lines(s.log_path, 20)  # then the log's tail
            body["error"] = f"{s.error}\n{tail}".strip() if tail else s.error
        # The agent's last exports first: the run's end revokes the key they are sent with.
        self.runner.relay.settle(s.id, stop=self.runner.stop)
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
        self._forget()
        if s.worktree_id:
            self.runner.reported_at = 0.0  # the worktree monitor hears how the agent left it
        # From the agent's start, also for a run re-adopted by a restarted runner.
        took = time.time() - s.started_at if s.started_at else time.monotonic() - self.begun
        detail = describe_exit(s.exit_code) if s.outcome != "cancelled" else "stopped"
        if s.outcome == "failed" and s.error and not s.error.startswith(("exit code", "killed")):
            detail = s.error
        if summary:
            detail += f"; {summary['commits_ahead']} commit(s), {len(summary['files_changed'])} file(s) changed"
        self.say(f"{s.outcome} after {took:.1f} s ({detail})")

    def _park(self) -> bool:
        """Report the run waiting for a person (deferral.py): no process, its capacity free, the
        worktree and the agent's session kept for the answer. False when the server refuses (no
        question anyone could answer): the run then ends failed, saying why."""
        s = self.state
        self._ship(final=True)
        # The agent's last exports first: waiting revokes the key they are sent with.
        self.runner.relay.settle(s.id, stop=self.runner.stop)
        body: dict[str, Any] = {"attempt": s.attempt, "status": "waiting", "deferred": s.deferred}
        body.update(self._agent_session_report())
        if s.exit_code is not None and s.exit_code >= 0:
            body["exit_code"] = s.exit_code
        tool = s.deferred.get("tool_name") or "a tool call"
        try:
            answer = self._status(body, until_done=True) or {}
        except SwitchyardError as exc:
            if exc.status != 409:
                raise
            s.outcome, s.error = "failed", f"its agent deferred {tool} to a person, but the run cannot wait: {exc}"
            return False
        self._forget()
        took = time.time() - s.started_at if s.started_at else time.monotonic() - self.begun
        if (answer.get("run") or {}).get("status") == "cancelled":  # a stop was asked for meanwhile
            self.say(f"cancelled after {took:.1f} s ({tool} deferred, and a stop asked for)")
        else:
            self.say(f"waiting for a person after {took:.1f} s ({tool} deferred); no agent process, worktree kept")
        return True

    def _agent_session_report(self) -> dict[str, str]:
        """The provider's session id for a status report, once known (a later run continues it)."""
        value = self.state.agent_session
        return {"agent_session": value} if value and AGENT_SESSION.fullmatch(value) else {}

    def _fail_quietly(self, error: str) -> None:
        s = self.state
        self._stop_agent()
        body = {"attempt": s.attempt, "status": "failed", "error": error[:4000]}
        with contextlib.suppress(SwitchyardError, LeaseLost):
            self._status(body)
        self._forget()
