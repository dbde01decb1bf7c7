"""The MCP tools of Switchyard, built once for both transports: stdio (`switchyard mcp`, server.py)
and Streamable HTTP (the web app's ``/mcp``, sessions_app/mcp_http.py).

Each tool calls the typed ``Client`` of one ``Agent`` and answers with the API's object itself as
``structuredContent``, under an output schema (schemas.py) that names its main fields (the whole object is sent:
the schemas allow the fields they do not name), and a one-line summary as text for the model.
Where the agent keeps its session and its open question between calls is the transport's choice
(``Memory``): the stdio process keeps it in memory, the web app in its cache.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent

from switchyard_client.api.client import Client
from switchyard_client.api.errors import SwitchyardError
from switchyard_client.mcp.schemas import (
    AnswerOut,
    CheckpointOut,
    ClaimOut,
    EventOut,
    FileWriteOut,
    MilestoneOut,
    ResumeOut,
    TaskOut,
    WorktreeClaimOut,
    WorktreeOut,
)

POLL_SECONDS = 1.0
MAX_WAIT_SECONDS = 600
# Worker threads the waits' answer polls share, apart from anyio's default pool (40): however many
# asks wait, the threads other calls need (the web app's key check, every other tool) stay free.
POLL_THREADS = 8
INSTRUCTIONS = (
    "Switchyard tracks your work: claim a task, report progress and milestones, checkpoint your "
    "state so you can resume after a crash, write work products into your workspace, hold a git "
    "worktree while you use it, and ask the product owner when you need a decision."
)


class Memory:
    """What an agent keeps between tool calls: the session it works in and the seq of a question
    still waiting for its answer. ``save`` keeps a change (a subclass says where)."""

    def __init__(self, session_id: str | None = None, question_seq: int | None = None):
        self.session_id = session_id
        self.question_seq = question_seq

    def save(self) -> None:
        """This one lives as long as the process: nothing to write."""


class Agent:
    """One agent's client and memory; ``session_intent`` names a session opened on first use."""

    def __init__(self, client: Client, memory: Memory, *, session_intent: str = "Work through MCP"):
        self.client = client
        self.memory = memory
        self.session_intent = session_intent

    def session(self) -> str:
        if self.memory.session_id is None:
            self.memory.session_id = self.client.session_open(intent=self.session_intent)["id"]
            self.memory.save()
        return self.memory.session_id

    def answer(self) -> str | None:
        """The answer to the open question, if a person has given it (one request)."""
        seq = self.memory.question_seq
        if seq is None:
            return None
        page = self.client.events_list(self.session(), after_seq=seq, limit=1000)
        for event in page["results"]:
            payload = event.get("payload") or {}
            answers_ours = "answer" in payload and payload.get("in_reply_to") in (None, seq)
            if event["type"] == "input_request" and answers_ours:
                self.memory.question_seq = None
                self.memory.save()
                return str(payload["answer"])
        return None

    def ask(self, question: str) -> int:
        """Post the question and move the session to waiting_for_input: the question's seq. Waiting
        for its answer is the tool's (``_asker``: on the event loop, not in a thread)."""
        session_id = self.session()
        event = self.client.event_append(session_id, "input_request", {"question": question})
        self.memory.question_seq = event["seq"]
        self.memory.save()
        # waiting_for_input is reached from running only; a fresh session is still planning
        # (moving to the status it has is a no-op).
        self.client.session_transition(session_id, "running")
        self.client.session_transition(session_id, "waiting_for_input", reason="asked the product owner")
        return event["seq"]


# How a tool finds its agent: the stdio server has one; the web app builds one per call from the
# request's headers (its key). ``close`` after the call, for an agent made for that call only.
AgentFor = Callable[[Mapping[str, str] | None], Agent]
# A tool's body run for the calling agent (off the event loop), as _tool_runner makes it.
Run = Callable[..., Awaitable[CallToolResult]]
# The slot a waiting ask holds, from the request's headers: the web app caps the waits of one key
# (raising ToolError past the cap); None (stdio, one agent) caps nothing.
WaitGate = Callable[[Mapping[str, str] | None], contextlib.AbstractAsyncContextManager]
# An ask and its wait for the calling agent, as _asker makes it: (the question's seq, the answer).
Ask = Callable[[Context, str, float], Awaitable[tuple[int, str | None]]]


def _result(summary: str, obj: Any) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=summary)], structured_content=obj)


def _task_summary(task: dict[str, Any]) -> str:
    return f"Task #{task['id']} {task['title']!r} ({task['priority']}) is {task['status']}."


def _resume_summary(resume: dict[str, Any]) -> str:
    checkpoint = resume.get("checkpoint")
    return (
        f"Session {resume['session']['id']} is {resume['status']}; "
        f"checkpoint {'#' + str(checkpoint['seq']) if checkpoint else 'none'}, "
        f"{len(resume['open_tool_calls'])} open tool calls, {len(resume['milestones'])} milestones, "
        f"{len(resume['claimed_tasks'])} claimed tasks, {len(resume['claimed_worktrees'])} held worktrees."
    )


def _answer_summary(answer: AnswerOut) -> str:
    if answer.question_seq is None:
        return "You have no open question."
    if answer.answer is not None:
        return f"The product owner answered: {answer.answer}"
    return "No answer yet."


def build_tools_server(
    agent_for: AgentFor, *, closes_agent: bool = False, wait_gate: WaitGate | None = None
) -> MCPServer:
    """An ``MCPServer`` with every Switchyard tool; ``agent_for`` gives the agent of a call (from the
    HTTP request's headers, or None over stdio). ``closes_agent``: close its client after the call.
    ``wait_gate``: the slot each waiting ask_product_owner holds (WaitGate)."""
    server = MCPServer("switchyard", instructions=INSTRUCTIONS)
    run = _tool_runner(agent_for, closes_agent=closes_agent)
    _task_tools(server, run)
    _session_tools(server, run)
    _worktree_tools(server, run)
    _question_tools(server, run, _asker(agent_for, closes_agent=closes_agent, wait_gate=wait_gate))
    return server


def _tool_runner(agent_for: AgentFor, *, closes_agent: bool) -> Run:
    async def run(ctx: Context, work: Callable[[Agent], CallToolResult], *, deliver_answer: bool = True):
        """Run a blocking client call off the event loop (an ask waits minutes: never on the loop);
        an answer that arrived since the last call goes first in the text."""
        headers = ctx.headers if ctx is not None else None

        def blocking() -> CallToolResult:
            agent = agent_for(headers)
            try:
                result = work(agent)
                answer = agent.answer() if deliver_answer and agent.memory.question_seq is not None else None
            except SwitchyardError as exc:
                raise ToolError(str(exc)) from exc
            finally:
                if closes_agent:
                    agent.client.close()
            if answer is not None:
                text = result.content[0].text  # type: ignore[union-attr]
                result.content = [
                    TextContent(type="text", text=f"The product owner answered your question: {answer}\n\n{text}")
                ]
            return result

        return await anyio.to_thread.run_sync(blocking)

    return run


def _asker(agent_for: AgentFor, *, closes_agent: bool, wait_gate: WaitGate | None) -> Ask:
    """ask_product_owner's body. The question is posted in a worker thread; the wait for its answer is
    on the event loop (anyio.sleep between polls), each poll a short call in a limiter of its own
    (POLL_THREADS). A wait held a worker thread before: 40 of them stalled every other agent's
    calls on the web app (issue 24)."""
    limiters: list[anyio.CapacityLimiter] = []  # made on first use, inside the event loop

    async def ask(ctx: Context, question: str, wait_seconds: float) -> tuple[int, str | None]:
        headers = ctx.headers if ctx is not None else None
        wait = max(0.0, min(wait_seconds, MAX_WAIT_SECONDS))  # NaN is no wait
        waits = wait > 0 and wait_gate is not None
        async with wait_gate(headers) if waits else contextlib.nullcontext():
            agent = await anyio.to_thread.run_sync(agent_for, headers)
            try:
                seq = await anyio.to_thread.run_sync(agent.ask, question)
                if not limiters:
                    limiters.append(anyio.CapacityLimiter(POLL_THREADS))
                deadline = anyio.current_time() + wait
                while True:
                    answer = await anyio.to_thread.run_sync(agent.answer, limiter=limiters[0])
                    left = deadline - anyio.current_time()
                    if answer is not None or left <= 0:
                        return seq, answer
                    await anyio.sleep(min(POLL_SECONDS, left))
            except SwitchyardError as exc:
                raise ToolError(str(exc)) from exc
            finally:
                if closes_agent:
                    agent.client.close()

    return ask


def _task_tools(server: MCPServer, run: Run) -> None:
    """Claiming, completing and failing tasks."""

    @server.tool()
    async def claim_next_task(ctx: Context, campaign: int | None = None) -> Annotated[CallToolResult, ClaimOut]:
        """Claim the best ready task (highest priority first). Returns the task, or none when none is ready."""

        def work(agent: Agent) -> CallToolResult:
            task = agent.client.task_claim_next(session=agent.session(), campaign=campaign)
            if task is None:
                return _result("No task is ready right now.", {"task": None})
            return _result(f"Claimed: {_task_summary(task)}", {"task": task})

        return await run(ctx, work)

    @server.tool()
    async def complete_task(ctx: Context, task_id: int, review: bool = False) -> Annotated[CallToolResult, TaskOut]:
        """Mark a task you hold as done (or as ready for review by a person)."""

        def work(agent: Agent) -> CallToolResult:
            task = agent.client.task_complete(task_id, review=review)
            return _result(_task_summary(task), task)

        return await run(ctx, work)

    @server.tool()
    async def fail_task(
        ctx: Context, task_id: int, error: str, retry: bool = False
    ) -> Annotated[CallToolResult, TaskOut]:
        """Give up a task you hold, saying why; with retry it goes back to ready for another try."""

        def work(agent: Agent) -> CallToolResult:
            task = agent.client.task_fail(task_id, error, retry=retry)
            return _result(_task_summary(task), task)

        return await run(ctx, work)


def _session_tools(server: MCPServer, run: Run) -> None:
    """The agent's session: progress, milestones, checkpoints and files."""

    @server.tool()
    async def report_progress(ctx: Context, message: str) -> Annotated[CallToolResult, EventOut]:
        """Tell the people watching what you are doing now (a log line on your session page)."""

        def work(agent: Agent) -> CallToolResult:
            event = agent.client.event_append(agent.session(), "log", {"message": message})
            return _result(f"Logged as event #{event['seq']}.", event)

        return await run(ctx, work)

    @server.tool()
    async def record_milestone(ctx: Context, text: str) -> Annotated[CallToolResult, MilestoneOut]:
        """Record a milestone: a short statement of what is done, read by whoever picks up the work."""

        def work(agent: Agent) -> CallToolResult:
            milestone = agent.client.milestone_record(agent.session(), text)
            return _result(f"Milestone #{milestone['id']} recorded.", milestone)

        return await run(ctx, work)

    @server.tool()
    async def save_checkpoint(ctx: Context, state: dict[str, Any]) -> Annotated[CallToolResult, CheckpointOut]:
        """Save your working state (a JSON object) so you can resume after a crash."""

        def work(agent: Agent) -> CallToolResult:
            checkpoint = agent.client.checkpoint_save(agent.session(), state)
            return _result(f"Checkpoint #{checkpoint['seq']} saved ({checkpoint['size_bytes']} bytes).", checkpoint)

        return await run(ctx, work)

    @server.tool()
    async def load_checkpoint(ctx: Context) -> Annotated[CallToolResult, ResumeOut]:
        """Everything needed to resume: latest checkpoint, open tool calls, milestones, held claims, status."""

        def work(agent: Agent) -> CallToolResult:
            resume = agent.client.session_resume(agent.session())
            return _result(_resume_summary(resume), resume)

        return await run(ctx, work)

    @server.tool()
    async def write_file(ctx: Context, path: str, content: str) -> Annotated[CallToolResult, FileWriteOut]:
        """Write a text file into your session workspace, e.g. work_products/report.md (a new version if it exists)."""

        def work(agent: Agent) -> CallToolResult:
            written = agent.client.file_put(agent.session(), path, content.encode("utf-8"))
            version = written["version"]
            summary = f"Wrote {written['artifact']['path']} (version {version['number']}, {version['size']} bytes)."
            return _result(summary, written)

        return await run(ctx, work)


def _worktree_tools(server: MCPServer, run: Run) -> None:
    """Git worktrees: claiming and releasing."""

    @server.tool()
    async def claim_worktree(
        ctx: Context, worktree_id: int, wait: bool = False
    ) -> Annotated[CallToolResult, WorktreeClaimOut]:
        """Take a git worktree for yourself; with wait, join the queue if someone else holds it."""

        def work(agent: Agent) -> CallToolResult:
            claim = agent.client.worktree_claim(worktree_id, wait=wait)
            where = f" (position {claim['position']} in the queue)" if claim.get("position") else ""
            return _result(f"Worktree #{worktree_id}: {claim['outcome']}{where}.", claim)

        return await run(ctx, work)

    @server.tool()
    async def release_worktree(ctx: Context, worktree_id: int) -> Annotated[CallToolResult, WorktreeOut]:
        """Give a worktree back, so the next agent in the queue gets it."""

        def work(agent: Agent) -> CallToolResult:
            worktree = agent.client.worktree_release(worktree_id)
            return _result(f"Worktree #{worktree['id']} released; it is {worktree['status']}.", worktree)

        return await run(ctx, work)


def _question_tools(server: MCPServer, run: Run, ask: Ask) -> None:
    """Questions to the product owner and their answers."""

    @server.tool()
    async def ask_product_owner(
        ctx: Context, question: str, wait_seconds: float = 60
    ) -> Annotated[CallToolResult, AnswerOut]:
        """Ask the product owner a question and wait (up to wait_seconds) for the answer typed on your
        session page. If it has not come by then, keep working: it arrives with a later tool result."""

        seq, answer = await ask(ctx, question, wait_seconds)
        out = AnswerOut(question_seq=seq, answered=answer is not None, answer=answer)
        if answer is None:
            return _result(
                "Asked. No answer yet: it will come back with one of your next tool calls.", out.model_dump()
            )
        return _result(_answer_summary(out), out.model_dump())

    @server.tool()
    async def check_answer(ctx: Context) -> Annotated[CallToolResult, AnswerOut]:
        """Whether the product owner has answered your open question yet."""

        def work(agent: Agent) -> CallToolResult:
            seq = agent.memory.question_seq
            answer = agent.answer() if seq is not None else None
            out = AnswerOut(question_seq=seq, answered=answer is not None, answer=answer)
            return _result(_answer_summary(out), out.model_dump())

        return await run(ctx, work, deliver_answer=False)
