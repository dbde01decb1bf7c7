"""`switchyard mcp` over stdio, driven by the mcp package's own client, against the live app."""

import threading

import pytest

from board.models import Task
from config.actors import Actor
from sessions_app.input_requests import session_answer_input
from sessions_app.keys import api_key_create
from sessions_app.models import AgentSession, Checkpoint, Milestone, StreamEvent
from tests.browser.server import ServerProcess
from tests.client.mcp_harness import TOOLS, McpConversation
from tests.factories import AgentFactory, UserFactory
from tests.worker import wait_for
from workspaces.models import Artifact
from workspaces.worktrees.services import worktree_create


@pytest.fixture
def live(transactional_db, tmp_path):
    server = ServerProcess(tmp_path / "server.log").start()
    yield server
    server.stop()


@pytest.fixture
def mcp_agent(transactional_db):
    agent = AgentFactory(slug="mcp-agent")
    return agent, api_key_create(agent=agent).key


@pytest.fixture
def conversation(live, mcp_agent, tmp_path):
    cwd = tmp_path / "agent-cwd"
    cwd.mkdir()
    talk = McpConversation(url=live.url, key=mcp_agent[1], cwd=cwd).start()
    yield talk
    talk.close()


def _session(agent) -> AgentSession:
    return AgentSession.objects.get(agent=agent)


def test_the_tools_are_listed_each_with_an_output_schema(conversation):
    tools = conversation.tools()

    assert set(tools) == TOOLS
    # A real schema: an object with its fields named, not {"result": "<json text>"}.
    assert all(tool.output_schema["type"] == "object" for tool in tools.values())
    assert "result" not in tools["complete_task"].output_schema["properties"]
    assert {"id", "title", "status", "priority"} <= set(tools["complete_task"].output_schema["properties"])
    assert {"seq", "state", "size_bytes"} <= set(tools["save_checkpoint"].output_schema["properties"])
    assert {"seq", "type", "payload"} <= set(tools["report_progress"].output_schema["properties"])


def test_a_task_from_claim_to_done_with_progress_checkpoint_and_file(conversation, mcp_agent, tmp_path):
    agent, _ = mcp_agent
    staff = Actor(user=UserFactory(is_staff=True))
    from board.services import task_create

    task = task_create(actor=staff, title="Write the release notes", priority="P1")

    text, claimed, error = conversation.call_full("claim_next_task")
    assert not error, text
    assert claimed["task"]["id"] == task.pk
    assert (claimed["task"]["title"], claimed["task"]["status"]) == ("Write the release notes", "in_progress")
    assert text == f"Claimed: Task #{task.pk} 'Write the release notes' (P1) is in_progress."
    session = _session(agent)
    task.refresh_from_db()
    assert (task.status, task.assignee_id, task.session_id) == (Task.Status.IN_PROGRESS, agent.pk, session.pk)
    # The session is remembered where the CLI looks for it.
    assert (tmp_path / "agent-cwd" / ".switchyard" / "session").read_text().strip() == session.pk

    progress = conversation.data("report_progress", {"message": "Drafting the notes"})
    milestone = conversation.data("record_milestone", {"text": "Draft done"})
    checkpoint = conversation.data("save_checkpoint", {"state": {"step": 2, "todo": ["proofread"]}})
    written = conversation.data("write_file", {"path": "work_products/notes.md", "content": "# Notes\n"})
    resumed = conversation.data("load_checkpoint")
    text, done, error = conversation.call_full("complete_task", {"task_id": task.pk})

    assert not error, text
    assert (done["id"], done["status"]) == (task.pk, "done")
    assert (progress["type"], progress["payload"]) == ("log", {"message": "Drafting the notes"})
    assert milestone["text"] == "Draft done"
    assert checkpoint["state"] == {"step": 2, "todo": ["proofread"]}
    assert (written["artifact"]["path"], written["version"]["number"], written["created"]) == (
        "work_products/notes.md",
        1,
        True,
    )
    assert resumed["session"]["id"] == session.pk
    assert resumed["checkpoint"]["state"] == {"step": 2, "todo": ["proofread"]}
    assert [m["text"] for m in resumed["milestones"]] == ["Draft done"]
    log = StreamEvent.objects.get(session=session, type=StreamEvent.Type.LOG)
    assert log.payload == {"message": "Drafting the notes"}
    assert list(Milestone.objects.filter(session=session).values_list("text", flat=True)) == ["Draft done"]
    assert Checkpoint.objects.filter(session=session).count() == 1
    artifact = Artifact.objects.get(path="work_products/notes.md")
    assert artifact.kind == Artifact.Kind.WORK_PRODUCT
    task.refresh_from_db()
    assert task.status == Task.Status.DONE


def test_no_ready_task_is_said_plainly(conversation):
    assert conversation.call_full("claim_next_task") == ("No task is ready right now.", {"task": None}, False)


def test_an_error_from_the_api_is_a_tool_error_with_the_message(conversation):
    text, error = conversation.call("complete_task", {"task_id": 999999})
    assert error
    assert "999999" in text or "not found" in text.lower()


def test_claim_and_release_a_worktree(conversation, mcp_agent, tmp_path):
    from tests.workspaces.conftest import commit_file, git
    from workspaces.worktrees.services import repository_register

    clone = tmp_path / "code" / "app"
    clone.mkdir(parents=True)
    git(clone, "init", "-q", "-b", "main")
    commit_file(clone, "README.md", "# app\n", "Initial commit")
    repository, _ = repository_register(path=str(clone))
    worktree, _ = worktree_create(
        actor=Actor(user=UserFactory(is_staff=True)), repository=repository, type="feat", name="notes"
    )

    claim = conversation.data("claim_worktree", {"worktree_id": worktree.pk})
    assert (claim["outcome"], claim["worktree"]["id"], claim["worktree"]["holder"]) == (
        "granted",
        worktree.pk,
        "mcp-agent",
    )
    worktree.refresh_from_db()
    assert worktree.holder_id == mcp_agent[0].pk

    released = conversation.data("release_worktree", {"worktree_id": worktree.pk})
    assert (released["id"], released["holder"]) == (worktree.pk, None)
    worktree.refresh_from_db()
    assert worktree.holder_id is None


def test_a_question_answered_while_the_agent_waits(conversation, mcp_agent):
    agent, _ = mcp_agent
    person = UserFactory(is_staff=True, username="olivia")
    result = {}

    def ask():
        result["call"] = conversation.call_full(
            "ask_product_owner", {"question": "Ship on Friday?", "wait_seconds": 30}
        )

    asking = threading.Thread(target=ask)
    asking.start()
    session = wait_for(
        lambda: AgentSession.objects.filter(agent=agent, status=AgentSession.Status.WAITING_FOR_INPUT).first(),
        message="the session to wait for input",
    )
    session_answer_input(actor=Actor(user=person), session=session, answer="Yes, after the demo.")
    asking.join(60)

    question = StreamEvent.objects.get(
        session=session, type=StreamEvent.Type.INPUT_REQUEST, payload__has_key="question"
    )
    assert result["call"] == (
        "The product owner answered: Yes, after the demo.",
        {"question_seq": question.seq, "answered": True, "answer": "Yes, after the demo."},
        False,
    )
    assert question.payload == {"question": "Ship on Friday?"}
    session.refresh_from_db()
    assert session.status == AgentSession.Status.RUNNING


def test_an_answer_that_comes_later_arrives_with_the_next_call(conversation, mcp_agent):
    agent, _ = mcp_agent
    text, asked, error = conversation.call_full(
        "ask_product_owner", {"question": "Which region first?", "wait_seconds": 0}
    )
    assert (text, error) == ("Asked. No answer yet: it will come back with one of your next tool calls.", False)
    assert (asked["answered"], asked["answer"]) == (False, None)
    assert conversation.call_full("check_answer") == (
        "No answer yet.",
        {"question_seq": asked["question_seq"], "answered": False, "answer": None},
        False,
    )

    session = _session(agent)
    session_answer_input(actor=Actor(user=UserFactory(is_staff=True)), session=session, answer="EU first.")
    text, progress, error = conversation.call_full("report_progress", {"message": "Waiting on the region"})

    assert not error
    assert text.startswith("The product owner answered your question: EU first.\n\n")
    assert progress["payload"] == {"message": "Waiting on the region"}
    # Handed over once: the next call carries no answer.
    assert conversation.call_full("check_answer") == (
        "You have no open question.",
        {"question_seq": None, "answered": False, "answer": None},
        False,
    )
