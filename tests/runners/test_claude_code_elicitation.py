"""An MCP server's question answered by a person in Switchyard, with the real Claude Code CLI
(claude_cli.py's pinned 2.1.332) in print mode (issue 15, part 2).

The scripted model (fake_anthropic.py) calls the one tool of a stdio MCP server (elicit_mcp_server.py,
configured with ``--mcp-config``); the tool asks where the issue should go (a form from a JSON schema);
Claude Code fires its ``Elicitation`` hook, wired to `switchyard hook` against the live app; the session
waits for input with the question; a person fills in the form on the session page (or declines, or
nobody answers); the hook prints the action and content; Claude Code hands them to the MCP server,
whose tool result, echoing what it received, is in the model's next Messages API request.
"""

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from ledger.models import ToolInvocation
from sessions_app.models import AgentSession, StreamEvent
from sessions_app.selectors import session_question
from tests.client.hook_person import person_answers, signed_in_engineer
from tests.client.live import agent_key, server_roots, sy_server  # noqa: F401
from tests.runners import elicit_mcp_server
from tests.runners.claude_cli import claude_env, hook_settings, require_claude, stream_lines
from tests.runners.fake_anthropic import FakeAnthropic, text, tool_use

pytestmark = pytest.mark.django_db(transaction=True)

TOOL = f"mcp__{elicit_mcp_server.SERVER_NAME}__file_issue"
EVENTS = ("SessionStart", "PreToolUse", "PostToolUse", "Elicitation", "ElicitationResult", "Stop")
QUESTION = f"{elicit_mcp_server.QUESTION} (Crash on start)"
ASKED = f"{elicit_mcp_server.SERVER_NAME} asks for input"
TURN_ENDED = "Claude Code finished its turn"
SCHEMA = {
    "type": "object",
    "properties": {
        "repo": {"type": "string", "title": "Repository", "description": "owner/name"},
        "priority": {"type": "string", "title": "Priority", "enum": ["low", "high"]},
        "notify": {"type": "boolean", "title": "Notify the owners", "default": False},
    },
    "required": ["repo", "priority"],
}


@pytest.fixture
def claude_run(sy_server, agent_key, tmp_path):  # noqa: F811 - the live fixtures
    """Start `claude -p` with the MCP server configured, against ``fake``; returns the running process."""
    claude = require_claude()
    workdir = tmp_path / "work"
    workdir.mkdir()
    server = Path(elicit_mcp_server.__file__)  # run by this test's Python, which has the mcp package
    mcp_config = {
        "mcpServers": {
            elicit_mcp_server.SERVER_NAME: {"type": "stdio", "command": sys.executable, "args": [str(server)]}
        }
    }

    def start(fake: FakeAnthropic, session_id: str, *, answer_within: int) -> subprocess.Popen:
        env = claude_env(
            home=tmp_path / "home",
            api_url=fake.url,
            # With tool search on, Claude Code offers MCP tools only behind its ToolSearch tool; the
            # fake knows the main conversation by the tools it offers, so they are offered up front.
            ENABLE_TOOL_SEARCH="false",
            SWITCHYARD_URL=sy_server.url,
            SWITCHYARD_KEY=agent_key,
            SWITCHYARD_STATE_DIR=str(tmp_path / "switchyard-state"),
            SWITCHYARD_HOOK_BUDGET="5",  # the time they need on a loaded machine
            SWITCHYARD_PERMISSION_TIMEOUT=str(answer_within),  # below the 60 s Claude Code gives a command hook
        )
        argv = [str(claude), "-p", "File the crash", "--output-format", "stream-json", "--verbose"]
        argv += ["--session-id", session_id, "--permission-mode", "default", "--allowedTools", TOOL]
        argv += ["--mcp-config", json.dumps(mcp_config), "--strict-mcp-config"]
        argv += ["--settings", hook_settings(events=EVENTS)]
        return subprocess.Popen(argv, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    return start


def _the_question(proc: subprocess.Popen, session_id: str, seconds: float = 120) -> StreamEvent:
    """The MCP server's question, once the session waits on it (while Claude Code still runs)."""
    deadline = time.monotonic() + seconds
    while proc.poll() is None and time.monotonic() < deadline:
        session = AgentSession.objects.filter(pk=session_id, status=AgentSession.Status.WAITING_FOR_INPUT).first()
        question = session_question(session=session) if session is not None else None
        if question is not None and question.payload.get("hook") == "Elicitation":
            return question
        time.sleep(0.2)
    out, err = proc.communicate(timeout=30) if proc.poll() is not None else ("", "")
    raise AssertionError(f"the session never waited on the MCP server's question\n{err[-2000:]}\n{out[-2000:]}")


def _tool_result(fake: FakeAnthropic, tool_use_id: str) -> dict:
    """What the model was handed for ``tool_use_id`` in the main conversation's last request."""
    last = fake.main_requests()[-1].body
    for message in last["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block.get("type") == "tool_result" and block.get("tool_use_id") == tool_use_id:
                return block
    raise AssertionError(f"no tool_result for {tool_use_id} in the last request\n{fake.describe()}")


def _status_changes_since(question: StreamEvent) -> list[str]:
    """Why the session's status changed from the question on, in order: it waits on the question, the
    answer (or the hook giving up) resumes it, and the Stop hook makes it wait for the next prompt."""
    changes = StreamEvent.objects.filter(session_id=question.session_id, type="status_change", seq__gt=question.seq)
    return [change.payload.get("reason") for change in changes.order_by("seq")]


def _echoed(block: dict) -> dict:
    """The MCP tool's own return value, out of the tool_result block Claude Code built from it."""
    content = block["content"]
    raw = content if isinstance(content, str) else "".join(part.get("text", "") for part in content)
    return json.loads(raw)


def test_a_person_fills_in_the_mcp_servers_form_and_the_tool_gets_the_answer(claude_run, sy_server):  # noqa: F811
    session_id = str(uuid.uuid4())
    script = [tool_use(TOOL, {"title": "Crash on start"}), text("Filed.")]
    with FakeAnthropic(script) as fake:
        # given Claude Code running a tool whose MCP server asks the user where the issue goes
        proc = claude_run(fake, session_id, answer_within=50)
        question = _the_question(proc, session_id)

        # when a person fills in the form on the session page and accepts
        form = {"decision": "accept", "answer": "", "field:repo": "dev/webapp", "field:priority": "high"}
        answered = person_answers(sy_server.url, session_id, signed_in_engineer(), **form, **{"field:notify": "on"})
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, f"{err}\n{fake.describe()}"

        # then the MCP tool received exactly that, and its result is in the model's next request
        content = {"repo": "dev/webapp", "priority": "high", "notify": True}
        block = _tool_result(fake, "toolu_fake_00")
        assert not block.get("is_error"), block
        assert _echoed(block) == {"title": "Crash on start", "action": "accept", "content": content}
    assert answered.status_code == 302, answered.text[:500]
    assert stream_lines(out)[-1]["result"] == "Filed."

    # and Switchyard holds the question as Claude Code asked it, answered by the person
    assert question.payload["question"] == QUESTION
    assert question.payload["mcp_server_name"] == elicit_mcp_server.SERVER_NAME
    assert question.payload["mode"] == "form"
    assert question.payload["requested_schema"] == SCHEMA
    assert question.payload["choices"] == ["accept", "decline", "cancel"]
    answer = StreamEvent.objects.get(session_id=session_id, payload__in_reply_to=question.seq)
    assert (answer.payload["decision"], answer.payload["content"]) == ("accept", content)
    assert session_question(session=AgentSession.objects.get(pk=session_id)) is None
    assert _status_changes_since(question) == [ASKED, "accepted by user:eng", TURN_ENDED]
    call = ToolInvocation.objects.get(session_id=session_id, client_id="toolu_fake_00")
    assert (call.tool_name, call.status) == (TOOL, "success")


@pytest.mark.parametrize(
    ("action", "resumed"),
    [
        ("decline", "declined by user:eng"),  # a person declines on the session page
        ("cancel", "nobody answered the MCP server's question within 3 s: cancel"),  # the default
    ],
)
def test_a_declined_or_unanswered_question_reaches_the_tool_as_such(claude_run, sy_server, action, resumed):  # noqa: F811
    session_id = str(uuid.uuid4())
    script = [tool_use(TOOL, {"title": "Crash on start"}), text("Not filed.")]
    with FakeAnthropic(script) as fake:
        proc = claude_run(fake, session_id, answer_within=50 if action == "decline" else 3)
        question = _the_question(proc, session_id)
        if action == "decline":
            declined = person_answers(sy_server.url, session_id, signed_in_engineer(), decision="decline")
            assert declined.status_code == 302, declined.text[:500]
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, f"{err}\n{fake.describe()}"

        block = _tool_result(fake, "toolu_fake_00")
        assert _echoed(block) == {"title": "Crash on start", "action": action, "content": None}

    answers = StreamEvent.objects.filter(session_id=session_id, payload__in_reply_to=question.seq)
    # nobody answered: nothing is recorded as a person's answer
    assert [a.payload["decision"] for a in answers] == (["decline"] if action == "decline" else [])
    assert _status_changes_since(question) == [ASKED, resumed, TURN_ENDED]
