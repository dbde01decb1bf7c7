"""`switchyard mcp`: the Switchyard API as Model Context Protocol tools, served over stdio.

An MCP-speaking agent (Claude Code, Codex, any MCP client) adds this server once and can then
claim work, report progress, checkpoint, write files, hold worktrees and ask the product owner
a question, all through the typed ``Client``. It needs the optional ``mcp`` package
(``pip install './client[mcp]'``); the rest of the client does not.

The session: ``SWITCHYARD_SESSION`` or the CLI's current session (``.switchyard/session``),
else one is opened on the first tool call (intent from ``SWITCHYARD_INTENT``) and remembered
there, so the CLI and the MCP server of one agent share it.

Questions: ``ask_product_owner`` posts an ``input_request`` event and moves the session to
``waiting_for_input``, then waits up to ``wait_seconds`` for the answer a person types on the
session page. If none comes in time, the answer is handed back on a later call: every tool's
result starts with it once it has arrived, and ``check_answer`` asks directly.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from switchyard_client.client import Client
from switchyard_client.errors import SwitchyardError
from switchyard_client.keepalive import Keepalive
from switchyard_client.state import current_session, remember_session

POLL_SECONDS = 1.0
MAX_WAIT_SECONDS = 600


class Agent:
    """What one MCP server process holds for its agent: the client, the session, an open question."""

    def __init__(self, client: Client):
        self.client = client
        self.session_id: str | None = current_session()
        self.question_seq: int | None = None  # the seq of a question still waiting for its answer

    def session(self) -> str:
        if self.session_id is None:
            opened = self.client.session_open(intent=os.environ.get("SWITCHYARD_INTENT", "Work through MCP"))
            self.session_id = opened["id"]
            remember_session(self.session_id)
        return self.session_id

    def answer(self) -> str | None:
        """The answer to the open question, if a person has given it (one request)."""
        if self.question_seq is None:
            return None
        page = self.client.events_list(self.session(), after_seq=self.question_seq, limit=1000)
        for event in page["results"]:
            payload = event.get("payload") or {}
            answers_ours = "answer" in payload and payload.get("in_reply_to") in (None, self.question_seq)
            if event["type"] == "input_request" and answers_ours:
                self.question_seq = None
                return str(payload["answer"])
        return None

    def ask(self, question: str, wait_seconds: float) -> str | None:
        session_id = self.session()
        event = self.client.event_append(session_id, "input_request", {"question": question})
        self.question_seq = event["seq"]
        # waiting_for_input is reached from running only; a fresh session is still planning
        # (moving to the status it has is a no-op).
        self.client.session_transition(session_id, "running")
        self.client.session_transition(session_id, "waiting_for_input", reason="asked the product owner")
        deadline = time.monotonic() + max(0.0, min(wait_seconds, MAX_WAIT_SECONDS))
        while True:
            answer = self.answer()
            if answer is not None or time.monotonic() >= deadline:
                return answer
            time.sleep(POLL_SECONDS)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, indent=2, sort_keys=True, default=str)


def build_server(client: Client | None = None) -> MCPServer:
    agent = Agent(client or Client())
    server = MCPServer(
        "switchyard",
        instructions=(
            "Switchyard tracks your work: claim a task, report progress and milestones, checkpoint your "
            "state so you can resume after a crash, write work products into your workspace, hold a git "
            "worktree while you use it, and ask the product owner when you need a decision."
        ),
    )

    async def call(work: Callable[[], Any]) -> str:
        """Run a blocking client call off the event loop; prefix a newly arrived answer."""

        def run() -> str:
            try:
                result = _text(work())
                answer = agent.answer() if agent.question_seq is not None else None
            except SwitchyardError as exc:
                raise ToolError(str(exc)) from exc
            if answer is not None:
                return f"The product owner answered your question: {answer}\n\n{result}"
            return result

        return await anyio.to_thread.run_sync(run)

    @server.tool()
    async def claim_next_task(campaign: int | None = None) -> str:
        """Claim the best ready task (highest priority first). Returns the task, or says there is none."""
        return await call(
            lambda: (
                agent.client.task_claim_next(session=agent.session(), campaign=campaign)
                or "No task is ready right now."
            )
        )

    @server.tool()
    async def complete_task(task_id: int, review: bool = False) -> str:
        """Mark a task you hold as done (or as ready for review by a person)."""
        return await call(lambda: agent.client.task_complete(task_id, review=review))

    @server.tool()
    async def fail_task(task_id: int, error: str, retry: bool = False) -> str:
        """Give up a task you hold, saying why; with retry it goes back to ready for another try."""
        return await call(lambda: agent.client.task_fail(task_id, error, retry=retry))

    @server.tool()
    async def report_progress(message: str) -> str:
        """Tell the people watching what you are doing now (a log line on your session page)."""
        return await call(lambda: agent.client.event_append(agent.session(), "log", {"message": message}))

    @server.tool()
    async def record_milestone(text: str) -> str:
        """Record a milestone: a short statement of what is done, read by whoever picks up the work."""
        return await call(lambda: agent.client.milestone_record(agent.session(), text))

    @server.tool()
    async def save_checkpoint(state: dict[str, Any]) -> str:
        """Save your working state (a JSON object) so you can resume after a crash."""
        return await call(lambda: agent.client.checkpoint_save(agent.session(), state))

    @server.tool()
    async def load_checkpoint() -> str:
        """Everything needed to resume: latest checkpoint, open tool calls, milestones, held claims, status."""
        return await call(lambda: agent.client.session_resume(agent.session()))

    @server.tool()
    async def write_file(path: str, content: str) -> str:
        """Write a text file into your session workspace, e.g. work_products/report.md (a new version if it exists)."""
        return await call(lambda: agent.client.file_put(agent.session(), path, content.encode("utf-8")))

    @server.tool()
    async def claim_worktree(worktree_id: int, wait: bool = False) -> str:
        """Take a git worktree for yourself; with wait, join the queue if someone else holds it."""
        return await call(lambda: agent.client.worktree_claim(worktree_id, wait=wait))

    @server.tool()
    async def release_worktree(worktree_id: int) -> str:
        """Give a worktree back, so the next agent in the queue gets it."""
        return await call(lambda: agent.client.worktree_release(worktree_id))

    @server.tool()
    async def ask_product_owner(question: str, wait_seconds: float = 60) -> str:
        """Ask the product owner a question and wait (up to wait_seconds) for the answer typed on your
        session page. If it has not come by then, keep working: it arrives with a later tool result."""

        def ask() -> str:
            answer = agent.ask(question, wait_seconds)
            if answer is None:
                return "Asked. No answer yet: it will come back with one of your next tool calls."
            return f"The product owner answered: {answer}"

        try:
            return await anyio.to_thread.run_sync(ask)
        except SwitchyardError as exc:
            raise ToolError(str(exc)) from exc

    @server.tool()
    async def check_answer() -> str:
        """Whether the product owner has answered your open question yet."""

        def check() -> str:
            if agent.question_seq is None:
                return "You have no open question."
            answer = agent.answer()
            return f"The product owner answered: {answer}" if answer is not None else "No answer yet."

        try:
            return await anyio.to_thread.run_sync(check)
        except SwitchyardError as exc:
            raise ToolError(str(exc)) from exc

    return server


def main() -> None:
    client = Client()
    # Between tool calls the agent may think for minutes: the heartbeat keeps its claims alive.
    with Keepalive(client):
        build_server(client).run("stdio")


if __name__ == "__main__":
    main()
