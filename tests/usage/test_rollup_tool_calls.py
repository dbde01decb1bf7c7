"""The rollup's tool_calls counts the calls Claude Code's hook records (issue 24): its telemetry has
api_request log records and no tool spans, so counting execute_tool usage rows alone showed 0 for
every Claude run whose Bash calls ran. A framework's tool span, which is both a usage row and a
ledger call (usage.tool_spans), counts once."""

import pytest

from tests.factories import CampaignFactory, SessionFactory, TaskFactory
from tests.usage import payloads as p

pytestmark = pytest.mark.django_db

LOGS = "/api/v1/otlp/v1/logs"
TRACES = "/api/v1/otlp/v1/traces"
CLAUDE = "3d1f9a2b-6c7e-4d8f-9a0b-1c2d3e4f5a6b"
FRAMEWORK = "framework-session"


def _hook_tool_call(client, session_id: str, tool_use_id: str, command: str, started_at: str):
    """What the hook's PreToolUse posts, then its PostToolUse's finish (plan.py)."""
    started = client.post(
        f"/api/v1/sessions/{session_id}/tool-calls/",
        {"id": tool_use_id, "tool_name": "Bash", "input": {"command": command}, "started_at": started_at},
        format="json",
    )
    assert started.status_code == 201, started.content
    finished = client.patch(
        f"/api/v1/sessions/{session_id}/tool-calls/{tool_use_id}/",
        {"status": "success", "output": {"stdout": "ok"}},
        format="json",
    )
    assert finished.status_code == 200, finished.content


@pytest.fixture
def runs(agent, other_agent):
    campaign = CampaignFactory(name="Launch")
    claude_task = TaskFactory(title="Claude's task", campaign=campaign)
    framework_task = TaskFactory(title="Framework's task")
    SessionFactory(agent=agent, id=CLAUDE, task=claude_task)
    SessionFactory(agent=other_agent, id=FRAMEWORK, task=framework_task)
    return claude_task, framework_task, campaign


def test_a_claude_runs_bash_calls_are_its_tool_calls(agent_client, other_client, staff_client, runs):
    claude_task, framework_task, campaign = runs
    # A Claude Code run: two model requests by OTLP, two Bash calls by the hook.
    records = [p.claude_api_request(CLAUDE, sequence=n) for n in (1, 2)]
    assert agent_client.post(LOGS, data=p.as_json(p.logs_json(*records)), content_type="application/json").json() == {}
    _hook_tool_call(agent_client, CLAUDE, "toolu_01", "ls -la", "2026-11-18T19:06:41Z")
    _hook_tool_call(agent_client, CLAUDE, "toolu_02", "make test", "2026-11-18T19:06:42Z")
    # A framework's trace: a chat span and an execute_tool span (a usage row and a ledger call).
    spans = p.as_json(p.gen_ai_spans(FRAMEWORK))
    assert other_client.post(TRACES, data=spans, content_type="application/json").status_code == 200

    by_task = staff_client.get("/api/v1/usage/", {"group_by": "task"}).json()["results"]
    by_agent = staff_client.get("/api/v1/usage/", {"group_by": "agent"}).json()["results"]
    by_campaign = staff_client.get("/api/v1/usage/", {"group_by": "campaign"}).json()["results"]
    by_day = staff_client.get("/api/v1/usage/", {"group_by": "day"}).json()["results"]
    mine = agent_client.get("/api/v1/usage/", {"group_by": "task", "session": CLAUDE}).json()["results"]

    assert {r["key"]: (r["requests"], r["tool_calls"]) for r in by_task} == {
        str(claude_task.pk): (2, 2),
        str(framework_task.pk): (1, 1),
    }
    assert {r["key"]: r["tool_calls"] for r in by_agent} == {"claude-1": 2, "codex-2": 1}
    assert {r["key"]: r["tool_calls"] for r in by_campaign} == {str(campaign.pk): 2, None: 1}
    assert sum(r["tool_calls"] for r in by_day) == 3
    assert [(r["key"], r["tool_calls"]) for r in mine] == [(str(claude_task.pk), 2)]


def test_tool_calls_alone_make_a_group(agent_client, staff_client, runs):
    """An agent whose telemetry is off still shows the calls its hook recorded."""
    claude_task, _, _ = runs
    _hook_tool_call(agent_client, CLAUDE, "toolu_09", "git status", "2026-11-18T19:06:41Z")

    rows = staff_client.get("/api/v1/usage/", {"group_by": "task"}).json()["results"]
    days = staff_client.get(
        "/api/v1/usage/", {"group_by": "day", "since": "2026-11-18T00:00:00Z", "until": "2026-11-19T00:00:00Z"}
    ).json()["results"]
    later = staff_client.get("/api/v1/usage/", {"group_by": "day", "since": "2026-11-19T00:00:00Z"}).json()["results"]

    assert rows == [
        {
            "key": str(claude_task.pk),
            "label": "Claude's task",
            "input_tokens": 0,
            "output_tokens": 0,
            "cache_read_tokens": 0,
            "cache_creation_tokens": 0,
            "cost_usd": "0.00000000",
            "requests": 0,
            "tool_calls": 1,
        }
    ]
    assert [(r["key"], r["tool_calls"]) for r in days] == [("2026-11-18", 1)]
    assert later == []


def test_an_agent_sees_only_its_own_tool_calls(agent_client, other_client, runs):
    _hook_tool_call(agent_client, CLAUDE, "toolu_03", "ls", "2026-11-18T19:06:41Z")

    assert other_client.get("/api/v1/usage/", {"group_by": "agent"}).json()["results"] == []
    assert [r["tool_calls"] for r in agent_client.get("/api/v1/usage/", {"group_by": "agent"}).json()["results"]] == [1]
