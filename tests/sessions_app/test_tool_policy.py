"""The server's tool policy (sessions_app/tool_policy.py): the pattern syntax, which rule decides,
and the verdict a recorded PreToolUse call answers with (ask: the question recorded and the session
waiting; deny; nothing for a tool no rule marks), and who may set it off."""

import pytest

from config.api.errors import DomainError
from ledger.models import ToolInvocation
from sessions_app.models import AgentSession, StreamEvent, ToolPolicy
from sessions_app.tool_policy import tool_policy_pattern_parse, tool_policy_rule
from sessions_app.tool_policy_admin import ToolPolicyForm
from tests.factories import AgentFactory, SessionFactory

pytestmark = pytest.mark.django_db

QUERIES_UNMARKED = 7  # the call's write (6: "no budget exceeded" is memoised after the warm-up), one read of the rules
SECRET = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


@pytest.mark.parametrize(
    ("pattern", "tool", "tool_input", "matches"),
    [
        ("Bash", "Bash", {"command": "ls"}, True),
        ("Bash(rm *)", "Bash", {"command": "rm -rf build"}, True),
        ("Bash(rm *)", "Bash", {"command": "git rm x"}, False),
        ("Bash(*--force*)", "Bash", {"command": "git push --force origin"}, True),
        ("Write", "Edit", {"file_path": "a.py"}, False),
        ("Write(*.env)", "Write", {"file_path": "/srv/app/.env"}, True),
        ("Write(*.env)", "Write", {"file_path": "/srv/app/env.py"}, False),
        ("NotebookEdit(*secret*)", "NotebookEdit", {"notebook_path": "secret.ipynb"}, True),
        ("WebFetch(https://internal.*)", "WebFetch", {"url": "https://internal.example/x"}, True),
        ("mcp__*", "mcp__github__create_issue", {"title": "x"}, True),
        ("mcp__github__*", "mcp__slack__post", {}, False),
        ('mcp__db__query(*"DROP*)', "mcp__db__query", {"sql": "DROP TABLE users"}, True),
        ("*", "Read", {"file_path": "x"}, True),
        ("bash", "Bash", {"command": "ls"}, False),  # case-sensitive, as tool names are
    ],
)
def test_patterns_match_the_tool_name_and_its_key_argument(agent, pattern, tool, tool_input, matches):
    ToolPolicy.objects.create(pattern=pattern)

    rule = tool_policy_rule(agent_id=agent.pk, tool_name=tool, tool_input=tool_input)

    assert (rule is not None) is matches


@pytest.mark.parametrize("pattern", ["", "Bash(rm *", "Bash (rm *)", "two words"])
def test_a_malformed_pattern_is_refused_by_the_parser_and_the_admin(pattern):
    with pytest.raises(DomainError, match="not a tool pattern"):
        tool_policy_pattern_parse(pattern)
    form = ToolPolicyForm(data={"pattern": pattern, "action": "ask", "position": 1, "enabled": True})
    assert not form.is_valid() and "pattern" in form.errors
    assert ToolPolicy.objects.count() == 0


def test_the_agents_own_rules_come_first_then_the_global_ones_by_position(agent, other_agent):
    ToolPolicy.objects.create(pattern="Bash", action="ask", position=1)
    exempt = ToolPolicy.objects.create(agent=agent, pattern="Bash(pytest*)", action="allow", position=50)
    ToolPolicy.objects.create(agent=agent, pattern="Bash(pytest*)", action="deny", position=60)
    ToolPolicy.objects.create(agent=other_agent, pattern="Bash(ls*)", action="deny", position=1)
    ToolPolicy.objects.create(pattern="Bash(ls*)", action="deny", position=0, enabled=False)

    assert tool_policy_rule(agent_id=agent.pk, tool_name="Bash", tool_input={"command": "pytest -q"}) == exempt
    mine = tool_policy_rule(agent_id=agent.pk, tool_name="Bash", tool_input={"command": "ls"})
    theirs = tool_policy_rule(agent_id=other_agent.pk, tool_name="Bash", tool_input={"command": "ls"})
    assert (mine.action, mine.agent_id) == ("ask", None)
    assert (theirs.action, theirs.agent_id) == ("deny", other_agent.pk)


def _start(client, session_id: str, command: str, call_id: str = "toolu_1"):
    body = {"id": call_id, "tool_name": "Bash", "input": {"command": command}}
    return client.post(f"/api/v1/sessions/{session_id}/tool-calls/", body, format="json")


def test_an_ask_rule_records_the_question_redacted_and_the_session_waits(agent, agent_client):
    SessionFactory(agent=agent, id="s1")
    ToolPolicy.objects.create(pattern="Bash(rm *)", note="deletes files")

    response = _start(agent_client, "s1", f"rm -rf build && curl -H 'token {SECRET}' x")
    again = _start(agent_client, "s1", f"rm -rf build && curl -H 'token {SECRET}' x")  # a retried request

    call = ToolInvocation.objects.get(session_id="s1")
    assert response.status_code == 201 and again.status_code == 200
    policy = {
        "decision": "ask",
        "pattern": "Bash(rm *)",
        "reason": "Switchyard's tool policy 'Bash(rm *)' (deletes files)",
        "request_id": f"policy-{call.pk}",
    }
    assert response.json()["policy"] == policy and again.json()["policy"] == policy
    question = StreamEvent.objects.get(session_id="s1", type="input_request")
    assert question.client_id == f"policy-{call.pk}"
    assert question.payload["choices"] == ["allow", "deny"] and question.payload["tool_name"] == "Bash"
    assert question.payload["policy"] == "Bash(rm *)"
    assert SECRET not in str(question.payload) and "rm -rf build" in str(question.payload["tool_input"])
    assert AgentSession.objects.get(pk="s1").status == AgentSession.Status.WAITING_FOR_INPUT
    read = agent_client.get(f"/api/v1/sessions/s1/input-requests/policy-{call.pk}/").json()
    assert read["answered"] is False and read["question"]["hook"] == "PreToolUse"


def test_a_deny_rule_answers_deny_and_asks_nobody(agent, agent_client):
    SessionFactory(agent=agent, id="s1")
    ToolPolicy.objects.create(agent=agent, pattern="Bash(git push *)", action="deny")

    body = _start(agent_client, "s1", "git push origin main").json()

    assert body["policy"]["decision"] == "deny" and "request_id" not in body["policy"]
    assert not StreamEvent.objects.filter(session_id="s1", type="input_request").exists()
    assert AgentSession.objects.get(pk="s1").status == AgentSession.Status.RUNNING


def test_a_tool_no_rule_marks_answers_without_a_verdict_in_the_same_queries(
    agent, agent_client, django_assert_num_queries
):
    SessionFactory(agent=agent, id="s1")
    ToolPolicy.objects.create(pattern="Write")
    _start(agent_client, "s1", "ls", call_id="warm-up")  # the key and the session are cached after

    with django_assert_num_queries(QUERIES_UNMARKED) as queries:
        response = _start(agent_client, "s1", "ls", call_id="toolu_2")

    assert response.status_code == 201 and "policy" not in response.json()
    assert sum("sessions_app_toolpolicy" in q["sql"] for q in queries.captured_queries) == 1
    assert AgentSession.objects.get(pk="s1").status == AgentSession.Status.RUNNING


def test_another_agents_key_sets_off_nothing_in_a_session_not_its_own(agent, other_client):
    SessionFactory(agent=agent, id="s1")
    ToolPolicy.objects.create(pattern="Bash")

    response = _start(other_client, "s1", "rm -rf /")

    assert response.status_code == 403
    assert not ToolInvocation.objects.filter(session_id="s1").exists()
    assert not StreamEvent.objects.filter(session_id="s1").exists()
    assert AgentSession.objects.get(pk="s1").status == AgentSession.Status.RUNNING


def test_a_batch_records_calls_without_asking(agent, agent_client):
    SessionFactory(agent=agent, id="s1")
    ToolPolicy.objects.create(pattern="Bash")
    batch = [{"id": f"toolu_{n}", "tool_name": "Bash", "input": {"command": "rm x"}} for n in range(2)]

    response = agent_client.post("/api/v1/sessions/s1/tool-calls/", batch, format="json")

    assert response.status_code == 201 and all("policy" not in r["item"] for r in response.json()["results"])
    assert AgentSession.objects.get(pk="s1").status == AgentSession.Status.RUNNING


def test_the_admin_form_saves_a_rule_for_an_agent():
    agent = AgentFactory(slug="claude-9")
    form = ToolPolicyForm(
        data={"agent": agent.pk, "pattern": " mcp__* ", "action": "ask", "position": 5, "enabled": True}
    )
    assert form.is_valid(), form.errors
    rule = form.save()
    assert (rule.pattern, rule.agent, rule.action) == ("mcp__*", agent, "ask")
