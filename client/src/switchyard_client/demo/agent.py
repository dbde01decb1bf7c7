"""The ``demo`` provider's agent: a small stand-in for a coding agent, shipped so that a fresh
``make run`` has something to run (SPEC §8, "Embedded default").

Run by a runner as ``python -m switchyard_client.demo_agent`` in the run's workdir, with the run's
environment (SWITCHYARD_URL, SWITCHYARD_KEY — the per-run key —, SWITCHYARD_SESSION, SWITCHYARD_RUN,
SWITCHYARD_TASK, SWITCHYARD_TASK_TITLE, SWITCHYARD_TASK_DESCRIPTION, SWITCHYARD_WORKDIR). In about ten
seconds it does what a real agent's hooks would report: a few tool calls (Read, Bash, Write), a plan,
a question to the product owner when the task's description has a line ``ask: <question>``, a work
product ``NOTES-task-<id>.md`` written into the workdir, uploaded to the session and committed when the
workdir is a git repository, and a milestone. Its stdout is the run's log, so it prints one readable
line per step.

On a run continuing the task after a request for changes, or a review run, it does what
``demo/followups.py`` says instead.

Exit codes: 0 done; 1 the task asked for a failure (a description line ``fail: <reason>``) or
Switchyard refused a report; 3 not configured; 143 stopped by SIGTERM (a "cancelled" event first).
``--speed`` (or DEMO_AGENT_SPEED) divides every pause: tests run it at 100 and more.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from switchyard_client.api.client import Client, now_iso
from switchyard_client.api.errors import ConfigurationError, SwitchyardError
from switchyard_client.api.retry import RetryPolicy, client_id
from switchyard_client.demo.followups import continue_work, review_change

DEFAULT_ANSWER_WAIT_SECONDS = 300.0
ANSWER_POLL_SECONDS = 0.5
AUTHOR_NAME = "Switchyard demo agent"
AUTHOR_EMAIL = "demo-agent@switchyard.invalid"
EXIT_FAILED = 1
EXIT_NOT_CONFIGURED = 3
EXIT_CANCELLED = 128 + signal.SIGTERM  # what a shell reports for a process ended by SIGTERM

_ASK = re.compile(r"^\s*ask:\s*(?P<text>\S.*?)\s*$", re.IGNORECASE | re.MULTILINE)
_FAIL = re.compile(r"^\s*fail:\s*(?P<text>\S.*?)\s*$", re.IGNORECASE | re.MULTILINE)


class Cancelled(BaseException):
    """Raised from the SIGTERM handler, so a pause or a poll ends at once.

    A BaseException: no ``except Exception`` on the way up may swallow it."""


def _on_sigterm(signum: int, frame: object) -> None:
    # A second SIGTERM while the first is being handled must not interrupt the "cancelled" report.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Cancelled


def say(message: str) -> None:
    # Flushed per line: the runner ships the log by byte offset while the agent still runs.
    print(f"[demo-agent] {message}", flush=True)


def question_in(description: str) -> str | None:
    match = _ASK.search(description or "")
    return match.group("text") if match else None


def failure_in(description: str) -> str | None:
    match = _FAIL.search(description or "")
    return match.group("text") if match else None


class DemoAgent:
    say = staticmethod(say)  # for demo/followups.py

    def __init__(self, client: Client, *, speed: float, answer_wait: float):
        self.client = client
        self.speed = speed if speed > 0 else 1.0
        self.answer_wait = answer_wait
        self.session = os.environ.get("SWITCHYARD_SESSION", "")
        if not self.session:
            raise ConfigurationError("SWITCHYARD_SESSION is not set: the runner names the run's session.")
        self.workdir = Path(os.environ.get("SWITCHYARD_WORKDIR") or os.getcwd()).resolve()
        self.task_id = os.environ.get("SWITCHYARD_TASK", "")
        self.run_id = os.environ.get("SWITCHYARD_RUN", "")
        self.title = os.environ.get("SWITCHYARD_TASK_TITLE", "") or "an untitled task"
        self.description = os.environ.get("SWITCHYARD_TASK_DESCRIPTION", "")
        self.notes_name = f"NOTES-task-{self.task_id or 'unknown'}.md"
        self.open_call: str | None = None  # the client id of the call running now, finished as cancelled on SIGTERM

    # --- the steps ----------------------------------------------------------------------------------
    def run(self) -> int:
        task = f"task #{self.task_id}" if self.task_id else "its task"
        say(f"starting on {task}: {self.title}")
        say(f"working in {self.workdir}")
        # The run's session may still be planning; asking and the tool calls read best while running.
        self.client.session_transition(self.session, "running", reason="demo agent started")
        self.event("log", message=f"Demo agent started on {task}: {self.title}")
        self.pause(1.0)
        kind = os.environ.get("SWITCHYARD_RUN_KIND", "work")
        if kind in ("continue", "review"):
            say(f"a {kind} run: " + ("acting on the request" if kind == "continue" else "reviewing the change"))
            code = continue_work(self) if kind == "continue" else review_change(self)
            self.event("log", message="Demo agent finished")
            say("done")
            return code

        files = self.tool(
            "Read",
            {"file_path": str(self.workdir), "purpose": "look around the workdir"},
            lambda: {"entries": sorted(p.name for p in self.workdir.iterdir())[:50]},
            say_before="reading the workdir",
        )
        say(f"the workdir holds {len(files['entries'])} entries")
        self.pause(1.5)

        plan = ["Read the task and the workdir", "Check the repository", "Write notes", "Commit the notes"]
        question = question_in(self.description)
        if question:
            plan.insert(2, "Ask the product owner")
        self.event("plan_update", plan=plan)
        say("plan: " + "; ".join(plan))
        self.pause(1.0)

        repo = self.is_git_repo()
        status = self.tool(
            "Bash",
            {"command": "git status --short --branch" if repo else "ls -la", "description": "check the workdir"},
            lambda: self.shell(["git", "status", "--short", "--branch"] if repo else ["ls", "-la"]),
            say_before="checking the repository" if repo else "the workdir is not a git repository",
        )
        first = status["stdout"].splitlines()[0] if status["stdout"].strip() else "(nothing to report)"
        say(f"  on branch {first[3:]}" if first.startswith("## ") else f"  {first}")
        self.pause(1.5)

        reason = failure_in(self.description)
        if reason:
            self.event("log", level="error", message=f"Giving up: {reason}")
            say(f"failing as the task asks: {reason}")
            return EXIT_FAILED

        answer = self.ask(question) if question else None

        notes = self.notes_text(question, answer)
        path = self.workdir / self.notes_name
        write = self.tool(
            "Write",
            {"file_path": str(path), "content": notes},
            lambda: self.write(path, notes),
            say_before=f"writing {self.notes_name}",
            keep_id=True,
        )
        uploaded = self.client.file_put(self.session, self.notes_name, path, tool_call=write["_id"])
        say(f"uploaded {uploaded.get('path', self.notes_name)} to the session")
        self.pause(2.0)

        commit = self.commit(path) if repo else None
        self.pause(1.0)

        text = f"Notes for task #{self.task_id} written" + (f" and committed ({commit})" if commit else "")
        self.client.milestone_record(self.session, text)
        say(f"milestone: {text}")
        self.event("log", message="Demo agent finished")
        say("done")
        return 0

    def ask(self, question: str) -> str | None:
        """Ask the product owner and wait up to ``answer_wait`` seconds (not scaled by speed: a person
        answers at a person's pace). None when no answer came in time."""
        asked = self.client.event_append(self.session, "input_request", {"question": question})
        self.client.session_transition(self.session, "waiting_for_input", reason="asked the product owner")
        say(f"asking the product owner: {question}")
        say(f"waiting up to {self.answer_wait:g} s for an answer on the session page")
        deadline = time.monotonic() + self.answer_wait
        while True:
            answer = self.answer_after(int(asked["seq"]))
            if answer is not None:
                say(f"the product owner answered: {answer}")
                return answer
            if time.monotonic() >= deadline:
                break
            time.sleep(ANSWER_POLL_SECONDS)
        # Back to running without an answer: the notes say the question is still open.
        self.client.session_transition(self.session, "running", reason="no answer in time; going on without one")
        self.event("log", message=f"No answer within {self.answer_wait:g} s; going on without one.")
        say("no answer in time; going on without one")
        return None

    def answer_after(self, seq: int) -> str | None:
        after = seq
        while True:
            page = self.client.events_list(self.session, after_seq=after, limit=100)
            for event in page["results"]:
                payload = event.get("payload") or {}
                answers = "answer" in payload and payload.get("in_reply_to") in (None, seq)
                if event["type"] == "input_request" and answers:
                    return str(payload["answer"])
                after = max(after, int(event["seq"]))
            if not page.get("next"):
                return None

    def commit(self, path: Path) -> str | None:
        message = f"demo: notes for task #{self.task_id}: {self.title}"[:200]
        body = f"Written by the Switchyard demo agent (run {self.run_id or '?'}, session {self.session})."
        command = f'git add {path.name} && git commit -m "{message}"'

        def work() -> dict[str, Any]:
            self.git("add", "--", path.name)
            if self.git("diff", "--cached", "--quiet", check=False).returncode == 0:
                return {"committed": None, "note": "nothing changed since the last commit"}
            # --no-verify and no signing: a demo must not stop at a machine's hooks or a GPG prompt.
            self.git("-c", "commit.gpgsign=false", "commit", "--no-verify", "-q", "-m", message, "-m", body)
            return {"committed": self.git("rev-parse", "--short", "HEAD").stdout.strip()}

        result = self.tool(
            "Bash", {"command": command, "description": "commit the notes"}, work, say_before="committing the notes"
        )
        sha = result["committed"]
        if sha:
            stat = self.git("show", "--stat", "--format=%H %s", "HEAD").stdout
            self.event("diff", commit=sha, stat=stat[:4000])
            say(f"committed {sha}: {message}")
        else:
            say("nothing to commit: the notes are unchanged")
        return sha

    # --- helpers ------------------------------------------------------------------------------------
    def tool(self, name: str, input: dict, work, *, say_before: str, keep_id: bool = False) -> dict[str, Any]:
        """Record a running tool call, do the work, record it finished (failure if the work raised)."""
        say(say_before)
        # Its client id is known before the request: a SIGTERM that lands while the answer is on its
        # way still finishes the call the server already stored.
        self.open_call = client_id()
        started = self.client.tool_call_start(self.session, name, input, id=self.open_call)
        self.pause(0.5)
        try:
            output = work()
        except (OSError, subprocess.SubprocessError) as exc:
            self.client.tool_call_finish(started["id"], "failure", error=str(exc)[:2000])
            raise
        self.client.tool_call_finish(started["id"], "success", output=output)
        self.open_call = None
        return {**output, "_id": started["id"]} if keep_id else output

    def event(self, type: str, **payload: Any) -> None:
        self.client.event_append(self.session, type, payload)

    def pause(self, seconds: float) -> None:
        time.sleep(seconds / self.speed)

    def is_git_repo(self) -> bool:
        """The workdir is a checkout of its own (a worktree), not a folder inside another repository:
        a session workspace under a project that is itself a git checkout (`make run` from a clone)
        is ignored by that repository, and its notes are not that repository's to commit."""
        top = self.git("rev-parse", "--show-toplevel", check=False).stdout.strip()
        return bool(top) and os.path.realpath(top) == os.path.realpath(self.workdir)

    def git(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        env = dict(os.environ)
        # The author and committer come from the environment when set (the runner or a person may
        # choose them), else the commit is signed off as the demo agent, so it works on a machine
        # without a git identity.
        for who in ("AUTHOR", "COMMITTER"):
            env.setdefault(f"GIT_{who}_NAME", AUTHOR_NAME)
            env.setdefault(f"GIT_{who}_EMAIL", AUTHOR_EMAIL)
        return subprocess.run(
            ["git", *args], cwd=self.workdir, env=env, capture_output=True, text=True, check=check, timeout=60
        )

    def shell(self, argv: list[str]) -> dict[str, Any]:
        done = subprocess.run(argv, cwd=self.workdir, capture_output=True, text=True, timeout=60)
        return {"exit_code": done.returncode, "stdout": done.stdout[-4000:], "stderr": done.stderr[-2000:]}

    @staticmethod
    def write(path: Path, text: str) -> dict[str, Any]:
        path.write_text(text, encoding="utf-8")
        return {"path": str(path), "bytes": len(text.encode("utf-8"))}

    def notes_text(self, question: str | None, answer: str | None) -> str:
        lines = [
            f"# Notes for task #{self.task_id}: {self.title}",
            "",
            f"Written by the Switchyard demo agent at {now_iso()} (run {self.run_id or '?'}, session {self.session}).",
            "",
            "## The task",
            "",
            self.description.strip() or "(no description)",
            "",
        ]
        if question:
            lines += ["## Question to the product owner", "", f"Q: {question}", ""]
            lines += [f"A: {answer}" if answer is not None else "A: (no answer in time; still open)", ""]
        lines += [
            "## What a real agent would do next",
            "",
            "- Read the code the task is about",
            "- Make the change, with tests",
            "- Commit, and move the card to Review",
            "",
        ]
        return "\n".join(lines)


def _report_cancelled(session: str, open_call: str | None) -> None:
    """Best effort and quick (one try, short timeouts): the runner sends SIGKILL after a grace period.
    A fresh client: the SIGTERM may have interrupted the other one mid-request."""
    try:
        with Client(timeout=3.0, retry=RetryPolicy(attempts=1)) as quick:
            if open_call is not None:
                # A 404 means it was never stored (the SIGTERM came before the request): nothing to finish.
                with contextlib.suppress(SwitchyardError):
                    quick.tool_call_finish_by_client_id(session, open_call, "cancelled", error="stopped by SIGTERM")
            quick.event_append(session, "log", {"message": "cancelled", "reason": "SIGTERM"})
    except (SwitchyardError, ConfigurationError):
        pass


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m switchyard_client.demo_agent",
        description="The demo provider's agent: reports a few tool calls, a question, a work product and "
        "a commit for the task in its environment (see the module's docstring).",
    )
    parser.add_argument(
        "--speed",
        type=float,
        default=float(os.environ.get("DEMO_AGENT_SPEED") or 1.0),
        help="divide every pause by this (default $DEMO_AGENT_SPEED or 1: about ten seconds in all)",
    )
    parser.add_argument(
        "--answer-wait",
        type=float,
        default=float(os.environ.get("DEMO_AGENT_ANSWER_WAIT") or DEFAULT_ANSWER_WAIT_SECONDS),
        help="how long to wait for the product owner's answer, in seconds "
        f"(default $DEMO_AGENT_ANSWER_WAIT or {DEFAULT_ANSWER_WAIT_SECONDS:g})",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _on_sigterm)
    session = os.environ.get("SWITCHYARD_SESSION", "")
    client: Client | None = None
    agent: DemoAgent | None = None
    try:
        client = Client(timeout=20.0)
        agent = DemoAgent(client, speed=args.speed, answer_wait=args.answer_wait)
        return agent.run()
    except Cancelled:
        say("stopped (SIGTERM); recording the cancellation")
        if client is not None and session:
            _report_cancelled(session, agent.open_call if agent is not None else None)
        return EXIT_CANCELLED
    except ConfigurationError as exc:
        say(f"not configured: {exc}")
        return EXIT_NOT_CONFIGURED
    except SwitchyardError as exc:
        say(f"Switchyard refused a report: {exc}")
        return EXIT_FAILED
    except (OSError, subprocess.SubprocessError) as exc:
        say(f"failed: {exc}")
        return EXIT_FAILED
    finally:
        if client is not None:
            client.close()
