"""A run that waits for a person holds no process (issue 26 §2), with the real Claude Code CLI.

A live server, a real `switchyard runner` offering `claude` with ``--permission-mode default
--allowedTools Bash,Read`` (so a Write needs a person), a real git repository, and the scripted
Messages API (fake_anthropic.py). The run's hook defers the Write: Claude Code exits with the call in
its result, the run is ``waiting`` and no agent process is left. The runner is killed and started
again meanwhile; nothing expires the run ten minutes later on the test clock (the lease expiry and
the reaper run with that time); a person then answers on the card:
- allowed: the runner resumes the session (``--resume``), the hook answers the re-asked PreToolUse
  with allow, the file is written, the run succeeds;
- denied: the agent is told why (the tool result carries the person's words) and replies; the run
  ends with that reply, the file never written.
And the same for a budget exceeded mid-run (the second Bash stops; the run waits) and raised (the
command runs, the run succeeds).
"""

import os
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.test import Client
from django.utils import timezone

from board.models import Task
from composition.reaper import agents_reap_stale
from config.actors import Actor
from config.pages import PRODUCT_OWNERS
from ledger.models import ToolInvocation
from runners.leases import runs_expire_leases
from runners.models import Run, Runner
from runners.services import run_queue
from sessions_app.models import AgentSession
from sessions_app.selectors import session_question
from tests.client.live import server_roots, sy_server  # noqa: F401
from tests.factories import TaskFactory, UserFactory
from tests.page_users import user_in
from tests.runners.fake_anthropic import FakeAnthropic, text, tool_use
from tests.runners.live_runner import run_in, wait_for
from tests.runners.test_runner_claude_e2e import (  # noqa: F401 - fixtures
    machine,
    queue_claude,
    repository,
    worktree_of,
)
from usage.budgets import budget_update
from usage.models import Budget

pytestmark = pytest.mark.usefixtures("transactional_db")

# The built-in claude provider's flags, but a Write is not among the allowed tools.
CLAUDE_FLAGS = ["--output-format", "stream-json", "--verbose", "--settings", "{hook_settings}"]
CLAUDE_FLAGS += ["--permission-mode", "default", "--allowedTools", "Bash,Read"]


@pytest.fixture
def person():
    return Actor(user=UserFactory(username="po", is_staff=True))


@pytest.fixture
def strict(machine):  # noqa: F811
    """The machine's claude provider with Write outside --allowedTools; ``strict(fake)`` points it at ``fake``."""

    def point_at(fake: FakeAnthropic) -> None:
        machine.point_at(fake)
        machine.providers["claude"].update(
            command=["claude", "-p", "--session-id", "{session_uuid}", *CLAUDE_FLAGS],
            resume_command=["claude", "-p", "--resume", "{session_uuid}", *CLAUDE_FLAGS],
        )
        machine.write()

    return point_at


def agents_of(run: Run) -> list[int]:
    """Processes of this run (their environment names it): none while it waits."""
    found = []
    marker = f"SWITCHYARD_RUN={run.pk}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def answer_on_the_card(run: Run, decision: str, message: str = "") -> float:
    """A product owner answers the run's question on the task's card; returns when (monotonic)."""
    client = Client()
    client.force_login(user_in(PRODUCT_OWNERS, username="olivia"))
    session = AgentSession.objects.get(pk=run.session_id)
    question = session_question(session=session)
    assert question is not None, "the session asks nothing"
    data = {"session": session.pk, "question": str(question.seq), "decision": decision, "answer": message}
    answered_at = time.monotonic()
    response = client.post(f"/runners/tasks/{run.task_id}/answer/", data, HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and "Answer sent" in response.content.decode(), response.content[:2000]
    return answered_at


def ten_minutes_later() -> None:
    """The test clock moves on: no lease and no reaper takes a waiting run, however late."""
    later = timezone.now() + timedelta(minutes=10)
    runs_expire_leases(now=later)
    agents_reap_stale(now=later)


def wait_until_waiting(run: Run, machine) -> Run:  # noqa: F811
    wait_for(
        lambda: run_in(run, "waiting", "succeeded", "failed"), timeout=240, what="the run to wait", machines=[machine]
    )
    assert run.status == "waiting", f"{run.error}\n{machine.output()}"
    wait_for(lambda: not agents_of(run), timeout=30, what="the agent's processes to end", machines=[machine])
    return run


def test_a_write_outside_allowed_tools_waits_without_a_process_then_runs_when_allowed(
    person,
    machine,  # noqa: F811 - the fixture
    strict,
    repository,  # noqa: F811 - the fixture
    sy_server,  # noqa: F811 - the fixture
):
    run = queue_claude(person, repository, "Write the notes")
    tree = worktree_of(repository, run)
    target = tree / "notes.md"
    script = [tool_use("Write", {"file_path": str(target), "content": "# Notes\n"}), text("Notes written.")]
    with FakeAnthropic(script) as fake:
        strict(fake)
        runner = machine.start()
        wait_until_waiting(run, machine)
        # What it waits for, on the run and on the card; its capacity is free; the file is not there.
        assert run.waiting_for["kind"] == "permission" and run.waiting_for["tool_name"] == "Write"
        assert run.waiting_for["tool_use_id"] == "toolu_fake_00" and run.waiting_for["runner"] == "cc-1"
        assert run.pid is None and not target.exists()
        assert AgentSession.objects.get(pk=run.session_id).status == "waiting_for_input"
        said = f"run {run.pk} waiting for a person"  # printed once the server took the report
        wait_for(lambda: said in machine.output(), what="the runner to say so", machines=[machine])

        runner.kill9()  # the machine restarts while the run waits
        killed = Runner.objects.get(name="cc-1").instance
        machine.start()
        # A person answers long after the restart: once the new runner process has spoken, the killed
        # one's long poll (still open on the server) hands out nothing (runners/dispatch.py).
        wait_for(lambda: Runner.objects.get(name="cc-1").instance != killed, what="the restarted runner to speak")
        ten_minutes_later()
        run.refresh_from_db()
        assert (run.status, run.attempt) == ("waiting", 1)

        answer_on_the_card(run, "allow")
        wait_for(lambda: run_in(run, "succeeded", "failed"), timeout=240, what="the run to end", machines=[machine])
        traffic = fake.describe()

    assert run.status == "succeeded", f"{run.error}\n{machine.output()}\n{traffic}"
    # 2: the killed runner's long poll, still open on the server, hands nothing out once its restarted
    # self has spoken (runners/dispatch.py: the runner's instance).
    assert (run.attempt, run.answer["decision"]) == (2, "allow"), machine.output()
    assert target.read_text() == "# Notes\n"  # the tool ran, in the worktree, after the answer
    calls = ToolInvocation.objects.filter(session_id=run.session_id).order_by("id")
    assert [(c.client_id, c.tool_name, c.status) for c in calls] == [("toolu_fake_00", "Write", "success")]
    assert "resuming" in machine.output()
    assert Task.objects.get(pk=run.task_id).status == "review"


def test_a_denied_write_ends_with_the_agents_reply_to_the_denial(person, machine, strict, repository, sy_server):  # noqa: F811
    run = queue_claude(person, repository, "Write the notes")
    target = worktree_of(repository, run) / "notes.md"
    reply = "Understood: I leave the notes unwritten."
    script = [tool_use("Write", {"file_path": str(target), "content": "# Notes\n"}), text(reply)]
    with FakeAnthropic(script) as fake:
        strict(fake)
        machine.start()
        wait_until_waiting(run, machine)
        answer_on_the_card(run, "deny", "Not in this branch.")
        wait_for(lambda: run_in(run, "succeeded", "failed"), timeout=240, what="the run to end", machines=[machine])
        main = fake.main_requests()

    assert run.status == "succeeded", f"{run.error}\n{machine.output()}"
    assert not target.exists()
    # The model was told why: the tool's result carries the person's words.
    told = [
        block
        for message in main[-1].body["messages"]
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]
    assert any("Denied by olivia in Switchyard: Not in this branch." in str(b.get("content")) for b in told), told
    call = ToolInvocation.objects.get(session_id=run.session_id, client_id="toolu_fake_00")
    assert call.status == "failure" and call.error == "Denied by olivia in Switchyard: Not in this branch."
    with_result = [e for e in machine.root.joinpath(run.log_path).read_text().splitlines() if '"type":"result"' in e]
    assert reply in with_result[-1]  # the run ends with the agent's reply to the denial


def test_a_budget_exceeded_mid_run_waits_and_goes_on_when_raised(person, machine, strict, repository, sy_server):  # noqa: F811
    task = TaskFactory(title="Write one and two", description="", repository=repository)
    # Another task's budget, exceeded all along: the server then never memoises "none exceeded", so
    # the budget exceeded below stops the very next tool use.
    now = timezone.now()
    Budget.objects.create(scope=Budget.Scope.TASK, task=TaskFactory(), limit_tokens=1, warned_at=now, exceeded_at=now)
    run = run_queue(actor=person, task=task, provider="claude")
    tree = worktree_of(repository, run)
    script = [
        tool_use("Bash", {"command": "echo one > one.txt", "description": "write one"}),
        tool_use("Bash", {"command": "echo two > two.txt", "description": "write two"}),
        text("Both written."),
    ]
    fake = FakeAnthropic(script, hold_at=1).start()  # holds the answer after the first tool's result
    try:
        strict(fake)
        machine.start()
        assert fake.held.wait(180), f"Claude Code never came back with the first result\n{machine.output()}"
        assert (tree / "one.txt").read_text() == "one\n"
        budget = Budget.objects.create(
            scope=Budget.Scope.TASK, task=task, limit_tokens=1, warned_at=timezone.now(), exceeded_at=timezone.now()
        )
        fake.go.set()
        wait_until_waiting(run, machine)
        assert run.waiting_for["kind"] == "budget" and run.waiting_for["tool_name"] == "Bash"
        assert not (tree / "two.txt").exists()

        budget_update(actor=person, budget=budget, limit_tokens=10_000_000)  # raised: the waiting session goes on
        wait_for(lambda: run_in(run, "succeeded", "failed"), timeout=240, what="the run to end", machines=[machine])
    finally:
        fake.stop()

    assert run.status == "succeeded", f"{run.error}\n{machine.output()}"
    assert (tree / "two.txt").read_text() == "two\n"
    assert (run.attempt, run.answer["decision"]) == (2, "allow"), machine.output()
    calls = ToolInvocation.objects.filter(session_id=run.session_id).order_by("id")
    assert [(c.client_id, c.status) for c in calls] == [("toolu_fake_00", "success"), ("toolu_fake_01", "success")]
    assert os.path.realpath(run.workdir) == str(tree)
