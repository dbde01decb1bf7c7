"""The client keeps a heartbeat going while a long-lived process works, and turns a 409
``lease_lost`` into a message that says what was lost, when, why and what to do."""

import json
import threading
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from board.models import Task, TaskClaim
from composition.reaper import agents_reap_stale
from sessions_app.keys import api_key_create
from sessions_app.models import Agent
from switchyard_client.api.errors import Conflict, LeaseLost, error_for
from switchyard_client.api.keepalive import Keepalive
from switchyard_client.cli import main
from tests.browser.server import ServerProcess
from tests.client.mcp_harness import McpConversation
from tests.factories import AgentFactory
from tests.worker import wait_for


class _CountingClient:
    def __init__(self, beats_wanted: int):
        self.beats = 0
        self.enough = threading.Event()
        self.wanted = beats_wanted

    def agent_heartbeat(self):
        self.beats += 1
        if self.beats >= self.wanted:
            self.enough.set()
        return {}


def test_keepalive_beats_from_its_thread_until_the_block_ends():
    client = _CountingClient(beats_wanted=3)

    with Keepalive(client, interval=0.01) as keepalive:
        assert client.enough.wait(10)
    beats_at_exit = client.beats

    assert keepalive._thread is None  # joined: no beat after the block
    assert client.beats == beats_at_exit and keepalive.beats >= 3


def test_a_lease_lost_answer_becomes_a_message_that_says_what_to_do():
    task = error_for(
        409,
        {"message": "...", "code": "lease_lost", "task": 7, "lost_at": "2026-03-01T10:00:00+00:00", "ttl_seconds": 300},
    )
    worktree = error_for(
        409,
        {
            "message": "...",
            "code": "lease_lost",
            "worktree": 3,
            "lost_at": "2026-03-01T10:05:00+00:00",
            "reason": "lease expired",
        },
    )
    plain = error_for(409, {"message": "Task 7 is done and not claimed; nothing to complete."})

    assert isinstance(task, LeaseLost) and isinstance(task, Conflict) and task.exit_code == 8
    assert str(task) == (
        "409: your claim on task 7 was lost at 2026-03-01T10:00:00+00:00 because no heartbeat for 300 s; "
        "claim it again (switchyard task claim 7)"
    )
    assert str(worktree) == (
        "409: your claim on worktree 3 was lost at 2026-03-01T10:05:00+00:00 because lease expired; "
        "claim it again (switchyard worktree claim 3)"
    )
    assert type(plain) is Conflict


@pytest.fixture
def live(transactional_db, tmp_path):
    server = ServerProcess(tmp_path / "server.log").start()
    yield server
    server.stop()


@pytest.mark.django_db(transaction=True)
def test_the_cli_says_the_claim_was_lost_after_a_real_reap(live, monkeypatch, tmp_path, capsys):
    # given an agent that claimed a task through the CLI, then went silent past the TTL and was reaped
    agent = AgentFactory(slug="quiet")
    monkeypatch.setenv("SWITCHYARD_URL", live.url)
    monkeypatch.setenv("SWITCHYARD_KEY", api_key_create(agent=agent).key)
    monkeypatch.chdir(tmp_path)
    Task.objects.create(title="long job", status=Task.Status.READY)
    assert main(["--json", "task", "claim-next", "--no-session"]) == 0
    task_id = json.loads(capsys.readouterr().out)["id"]
    ttl = settings.HEARTBEAT_TTL_SECONDS
    Agent.objects.filter(pk=agent.pk).update(last_heartbeat_at=timezone.now() - timedelta(seconds=ttl + 1))
    [reaped] = agents_reap_stale()
    assert reaped.tasks == [task_id]

    # when it completes the task
    code = main(["task", "complete", str(task_id)])

    # then exit code 8 (conflict) and a message naming the task, the time, the reason and the fix
    lost_at = TaskClaim.objects.get(task_id=task_id).released_at.isoformat()
    assert code == 8
    assert capsys.readouterr().err == (
        f"switchyard: 409: your claim on task {task_id} was lost at {lost_at} because no heartbeat for {ttl} s; "
        f"claim it again (switchyard task claim {task_id})\n"
    )
    assert Task.objects.get(pk=task_id).status == Task.Status.READY


@pytest.mark.django_db(transaction=True)
def test_the_mcp_server_keeps_a_heartbeat_going_with_no_tool_call(live, tmp_path):
    # given an MCP server for an agent never heard from, beating every second
    agent = AgentFactory(slug="mcp-quiet")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    talk = McpConversation(
        url=live.url, key=api_key_create(agent=agent).key, cwd=cwd, env={"SWITCHYARD_HEARTBEAT_SECONDS": "1"}
    ).start()
    try:
        # when no tool is called, then the agent is heard from all the same
        wait_for(
            lambda: Agent.objects.get(pk=agent.pk).last_heartbeat_at is not None,
            timeout=20,
            message="a heartbeat from the MCP server",
        )
    finally:
        talk.close()
