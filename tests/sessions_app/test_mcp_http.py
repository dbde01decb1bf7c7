"""The `switchyard mcp` tools over Streamable HTTP at the web app's /mcp (issue 15, part 5), driven by
the mcp package's own HTTP client against a live server (uvicorn, as in production).

Both protocol eras the SDK speaks are tried: the initialize handshake ("legacy", 2025-11-25) and the
per-request envelope of 2026-07-28."""

import asyncio
import re
import threading
import time

import httpx
import jsonschema
import pytest
from django.test import Client as DjangoClient

from board.models import Task
from board.services import task_create
from config.actors import Actor
from config.pages import ENGINEERS
from sessions_app.keys import api_key_create
from sessions_app.models import AgentApiKey, AgentSession, Checkpoint, Milestone, StreamEvent
from switchyard_client.mcp.tools import build_tools_server
from tests.browser.server import ServerProcess
from tests.client.mcp_harness import TOOLS, McpConversation
from tests.factories import AgentFactory, UserFactory
from tests.page_users import user_in
from tests.worker import wait_for
from workspaces.models import Artifact

pytestmark = pytest.mark.django_db(transaction=True)

MODES = ["legacy", "2026-07-28"]


@pytest.fixture(scope="module")
def live(django_db_setup, tmp_path_factory):
    """One server for the module (starting one takes seconds); each test's rows are its own."""
    server = ServerProcess(tmp_path_factory.mktemp("mcp-http") / "server.log").start()
    yield server
    server.stop()


@pytest.fixture
def agent_key():
    agent = AgentFactory(slug="remote-agent")
    return agent, api_key_create(agent=agent).key


@pytest.fixture
def connect(live):
    opened = []

    def connect(key: str, mode: str = "legacy", timeout: float = 60) -> McpConversation:
        talk = McpConversation.http(url=live.url, key=key, mode=mode, timeout=timeout).start()
        opened.append(talk)
        return talk

    yield connect
    for talk in opened:
        talk.close()


def _checked(conversation: McpConversation, name: str, arguments: dict | None = None) -> dict:
    """The structured content of a call, checked against the output schema the tool lists."""
    text, structured, error = conversation.call_full(name, arguments)
    assert not error, text
    jsonschema.validate(structured, conversation.tools()[name].output_schema)
    assert text and not text.lstrip().startswith("{")  # a summary for the model, not the JSON again
    return structured


@pytest.mark.parametrize("mode", MODES)
def test_the_stdio_tools_are_listed_with_their_output_schemas(connect, agent_key, mode):
    conversation = connect(agent_key[1], mode)
    tools = conversation.tools()

    assert conversation.protocol_version == ("2025-11-25" if mode == "legacy" else mode)
    assert set(tools) == TOOLS
    # The stdio server's tools, listed in-process (listing calls no agent).
    stdio = {tool.name: tool for tool in asyncio.run(build_tools_server(lambda _headers: None).list_tools())}
    for name, tool in tools.items():
        assert (tool.input_schema, tool.output_schema) == (stdio[name].input_schema, stdio[name].output_schema), name


@pytest.mark.parametrize("mode", MODES)
def test_a_task_from_claim_to_done_over_http(connect, agent_key, mode):
    agent, key = agent_key
    task = task_create(actor=Actor(user=UserFactory(is_staff=True)), title="Write the release notes", priority="P1")
    conversation = connect(key, mode)

    claimed = _checked(conversation, "claim_next_task")
    progress = _checked(conversation, "report_progress", {"message": "Drafting"})
    milestone = _checked(conversation, "record_milestone", {"text": "Draft done"})
    checkpoint = _checked(conversation, "save_checkpoint", {"state": {"step": 2}})
    written = _checked(conversation, "write_file", {"path": "work_products/notes.md", "content": "# Notes\n"})
    resumed = _checked(conversation, "load_checkpoint")
    done = _checked(conversation, "complete_task", {"task_id": task.pk})

    session = AgentSession.objects.get(agent=agent)
    assert (claimed["task"]["id"], claimed["task"]["session"]) == (task.pk, session.pk)
    assert (progress["type"], progress["payload"]) == ("log", {"message": "Drafting"})
    assert milestone["text"] == "Draft done"
    assert checkpoint["state"] == {"step": 2}
    assert (written["artifact"]["path"], written["version"]["number"]) == ("work_products/notes.md", 1)
    assert (resumed["session"]["id"], resumed["checkpoint"]["seq"]) == (session.pk, checkpoint["seq"])
    assert [m["text"] for m in resumed["milestones"]] == ["Draft done"]
    assert (done["id"], done["status"]) == (task.pk, "done")
    task.refresh_from_db()
    assert (task.status, task.assignee_id, task.session_id) == (Task.Status.DONE, agent.pk, session.pk)
    assert StreamEvent.objects.get(session=session, type=StreamEvent.Type.LOG).payload == {"message": "Drafting"}
    assert list(Milestone.objects.filter(session=session).values_list("text", flat=True)) == ["Draft done"]
    assert Checkpoint.objects.filter(session=session).count() == 1
    assert Artifact.objects.get(path="work_products/notes.md").kind == Artifact.Kind.WORK_PRODUCT


def test_the_session_is_kept_between_connections(connect, agent_key):
    """Stateless HTTP: a second connection (any web process) works in the session the first opened."""
    agent, key = agent_key
    _checked(connect(key), "report_progress", {"message": "first"})
    _checked(connect(key, "2026-07-28"), "report_progress", {"message": "second"})

    session = AgentSession.objects.get(agent=agent)
    logs = StreamEvent.objects.filter(session=session, type=StreamEvent.Type.LOG).order_by("seq")
    assert [e.payload["message"] for e in logs] == ["first", "second"]


def test_another_agents_task_is_refused_and_unchanged(connect, agent_key):
    owner = AgentFactory(slug="owner")
    staff = Actor(user=UserFactory(is_staff=True))
    task = task_create(actor=staff, title="Someone else's", priority="P1")
    owner_talk = connect(api_key_create(agent=owner).key)
    assert _checked(owner_talk, "claim_next_task")["task"]["id"] == task.pk

    text, structured, error = connect(agent_key[1]).call_full("complete_task", {"task_id": task.pk})

    assert error and structured is None
    assert "owner" in text or "not" in text.lower()
    task.refresh_from_db()
    assert (task.status, task.assignee_id) == (Task.Status.IN_PROGRESS, owner.pk)


CALL = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {"name": "claim_next_task", "arguments": {}},
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}


@pytest.mark.parametrize(
    ("authorization", "status", "message"),
    [
        (None, 401, "Authenticate with an agent key: Authorization: Bearer <key>."),
        ("Bearer sy_nope_0000", 401, "Invalid or revoked API key."),
        ("Basic dXNlcjpwdw==", 401, "Authenticate with an agent key: Authorization: Bearer <key>."),
    ],
)
def test_a_missing_or_bad_key_is_refused_and_nothing_changes(live, authorization, status, message):
    task = task_create(actor=Actor(user=UserFactory(is_staff=True)), title="Ready", priority="P1")
    headers = dict(MCP_HEADERS, **({"Authorization": authorization} if authorization else {}))

    response = httpx.post(f"{live.url}/mcp", json=CALL, headers=headers, timeout=20)

    assert (response.status_code, response.json()) == (status, {"detail": message})
    assert response.headers["www-authenticate"] == "Bearer"
    task.refresh_from_db()
    assert (task.status, task.assignee_id) == (Task.Status.READY, None)
    assert AgentSession.objects.count() == 0


def test_a_runner_only_key_is_refused_and_nothing_changes(live):
    runner_key = api_key_create(agent=AgentFactory(slug="runner"), scopes=[AgentApiKey.Scope.RUN]).key
    task = task_create(actor=Actor(user=UserFactory(is_staff=True)), title="Ready", priority="P1")

    response = httpx.post(
        f"{live.url}/mcp", json=CALL, headers=dict(MCP_HEADERS, Authorization=f"Bearer {runner_key}"), timeout=20
    )

    assert response.status_code == 403
    assert response.json() == {
        "detail": "This key's scopes (run) do not reach /mcp: it needs a key of scope agent or orchestrate."
    }
    task.refresh_from_db()
    assert (task.status, task.assignee_id) == (Task.Status.READY, None)
    assert AgentSession.objects.count() == 0


def test_the_mcp_client_with_a_bad_key_cannot_connect(live):
    with pytest.raises(RuntimeError, match="did not start"):
        McpConversation.http(url=live.url, key="sy_nope_0000", timeout=20).start()
    assert AgentSession.objects.count() == 0


def _signed_in_engineer() -> dict:
    """The cookies of an engineer's browser (made here, in the test's thread: no ORM in the other)."""
    person = DjangoClient()
    person.force_login(user_in(ENGINEERS, username="eng"))
    return {"sessionid": person.cookies["sessionid"].value}


def _person_answers(base_url: str, session_id: str, cookies: dict, answer: str) -> httpx.Response:
    """A signed-in engineer sends the session page's answer form over HTTP, as a browser would."""
    with httpx.Client(base_url=base_url, cookies=cookies, timeout=20) as browser:
        page = browser.get(f"/sessions/{session_id}/")
        assert page.status_code == 200
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        question = re.search(r'name="question" value="([^"]*)"', page.text).group(1)  # the question it shows
        return browser.post(
            f"/sessions/{session_id}/answer/",
            data={"csrfmiddlewaretoken": token, "question": question, "answer": answer},
            headers={"Referer": f"{base_url}/sessions/{session_id}/"},
        )


@pytest.mark.parametrize("mode", MODES)
def test_a_question_answered_by_a_person_while_the_tool_waits(connect, agent_key, live, mode):
    agent, key = agent_key
    asking_talk = connect(key, mode)
    other_talk = connect(key, mode)
    cookies = _signed_in_engineer()
    result = {}
    asking = threading.Thread(
        target=lambda: result.update(
            call=asking_talk.call_full("ask_product_owner", {"question": "Ship on Friday?", "wait_seconds": 30})
        )
    )
    asking.start()
    session = wait_for(
        lambda: AgentSession.objects.filter(agent=agent, status=AgentSession.Status.WAITING_FOR_INPUT).first(),
        message="the session to wait for input",
    )

    # While the ask waits, the server still answers: the wait is in a thread, not on the event loop.
    started = time.monotonic()
    assert other_talk.call_full("check_answer")[0] == "No answer yet."
    assert time.monotonic() - started < 10
    assert asking.is_alive()
    response = _person_answers(live.url, session.pk, cookies, "Yes, after the demo.")
    asking.join(60)

    assert response.status_code == 302
    question = StreamEvent.objects.get(
        session=session, type=StreamEvent.Type.INPUT_REQUEST, payload__has_key="question"
    )
    assert question.payload == {"question": "Ship on Friday?"}
    assert result["call"] == (
        "The product owner answered: Yes, after the demo.",
        {"question_seq": question.seq, "answered": True, "answer": "Yes, after the demo."},
        False,
    )
    session.refresh_from_db()
    assert session.status == AgentSession.Status.RUNNING


def test_a_later_answer_comes_with_the_next_call_on_a_new_connection(connect, agent_key, live):
    agent, key = agent_key
    asked = _checked(connect(key), "ask_product_owner", {"question": "Which region first?", "wait_seconds": 0})
    assert (asked["answered"], asked["answer"]) == (False, None)
    session = AgentSession.objects.get(agent=agent)
    assert _person_answers(live.url, session.pk, _signed_in_engineer(), "EU first.").status_code == 302

    talk = connect(key, "2026-07-28")
    text, progress, error = talk.call_full("report_progress", {"message": "Waiting on the region"})

    assert not error
    assert text.startswith("The product owner answered your question: EU first.\n\n")
    assert progress["payload"] == {"message": "Waiting on the region"}
    # Handed over once.
    assert talk.call_full("check_answer")[1] == {"question_seq": None, "answered": False, "answer": None}


def test_a_worktree_held_and_given_back_and_a_task_failed_over_http(connect, agent_key, tmp_path):
    from tests.workspaces.conftest import commit_file, git
    from workspaces.worktrees.services import repository_register, worktree_create

    agent, key = agent_key
    clone = tmp_path / "code" / "app"
    clone.mkdir(parents=True)
    git(clone, "init", "-q", "-b", "main")
    commit_file(clone, "README.md", "# app\n", "Initial commit")
    repository, _ = repository_register(path=str(clone))
    staff = Actor(user=UserFactory(is_staff=True))
    worktree, _ = worktree_create(actor=staff, repository=repository, type="feat", name="notes")
    task = task_create(actor=staff, title="Flaky", priority="P2")
    conversation = connect(key, "2026-07-28")

    claim = _checked(conversation, "claim_worktree", {"worktree_id": worktree.pk})
    worktree.refresh_from_db()
    held_by = worktree.holder_id
    released = _checked(conversation, "release_worktree", {"worktree_id": worktree.pk})
    _checked(conversation, "claim_next_task")
    failed = _checked(conversation, "fail_task", {"task_id": task.pk, "error": "tests flake", "retry": True})

    assert (claim["outcome"], claim["worktree"]["holder"], held_by) == ("granted", "remote-agent", agent.pk)
    assert (released["id"], released["holder"]) == (worktree.pk, None)
    worktree.refresh_from_db()
    assert worktree.holder_id is None
    assert (failed["id"], failed["status"], failed["error"]) == (task.pk, "ready", "tests flake")
    task.refresh_from_db()
    assert (task.status, task.assignee_id, task.error) == (Task.Status.READY, None, "tests flake")


def test_a_host_not_allowed_is_refused_before_the_key_is_read(live, agent_key):
    """As Django refuses a Host outside ALLOWED_HOSTS (a DNS-rebinding page reaching a local server)."""
    headers = dict(MCP_HEADERS, Authorization=f"Bearer {agent_key[1]}", Host="evil.example")

    response = httpx.post(f"{live.url}/mcp", json=CALL, headers=headers, timeout=20)

    assert (response.status_code, response.json()) == (
        400,
        {"detail": "Host 'evil.example' is not one of this server's ALLOWED_HOSTS."},
    )
    assert AgentSession.objects.count() == 0
