"""GenAI ``execute_tool`` spans become finished calls in the session's tool-call ledger (usage/tool_spans.py)."""

import datetime as dt

import pytest

from ledger.models import ToolInvocation
from sessions_app.models import AgentSession
from tests.factories import SessionFactory, TaskFactory
from tests.usage import payloads as p
from usage import services
from usage.models import UsageRecord

pytestmark = pytest.mark.django_db

TRACES = "/api/v1/otlp/v1/traces"
SESSION = "3a9d0c44-1f7e-4c55-9b0e-7d2f6e8a1b33"


def export(client, document: dict):
    return client.post(TRACES, data=p.as_json(document), content_type="application/json")


def tool_span(document: dict) -> dict:
    return document["resourceSpans"][0]["scopeSpans"][0]["spans"][2]


def test_a_tool_span_is_a_finished_call_of_its_session_and_a_retry_adds_nothing(agent_client, agent):
    session = SessionFactory(agent=agent, id=SESSION)

    first = export(agent_client, p.gen_ai_spans(SESSION))
    again = export(agent_client, p.gen_ai_spans(SESSION))

    assert (first.status_code, again.status_code) == (200, 200)
    call = ToolInvocation.objects.get(session=session)
    started = dt.datetime.fromtimestamp((p.T0 + 1_600_000_000) / 1e9, tz=dt.UTC)
    assert (call.tool_name, call.status, call.agent_id, call.error) == ("get_weather", "success", agent.pk, "")
    assert (call.started_at, call.duration_ms) == (started, 50)
    assert call.client_id.startswith("otel-span:")
    assert UsageRecord.objects.filter(tool_name="get_weather").count() == 1


def test_a_span_with_an_error_status_is_a_failed_call_with_its_message(agent_client, agent):
    session = SessionFactory(agent=agent, id=SESSION)
    document = p.gen_ai_spans(SESSION)
    tool_span(document)["status"] = {"code": 2, "message": "weather service answered 503"}

    export(agent_client, document)

    call = ToolInvocation.objects.get(session=session)
    assert (call.status, call.error) == ("failure", "weather service answered 503")


def test_a_closed_session_keeps_its_ledger_and_still_gets_the_usage(agent_client, agent):
    session = SessionFactory(agent=agent, id=SESSION, status=AgentSession.Status.COMPLETED)

    response = export(agent_client, p.gen_ai_spans(SESSION))

    assert response.status_code == 200
    assert not ToolInvocation.objects.filter(session=session).exists()
    assert UsageRecord.objects.filter(session=session).count() == 2


def test_another_agents_session_gets_no_call(agent_client, other_agent):
    theirs = SessionFactory(agent=other_agent, id=SESSION)

    export(agent_client, p.gen_ai_spans(SESSION))

    assert not ToolInvocation.objects.filter(session=theirs).exists()
    assert UsageRecord.objects.get(tool_name="get_weather").session is None


def test_an_export_pushes_the_cards_of_the_tasks_it_spent_on_once(agent_client, agent, monkeypatch):
    pushed: list[set] = []
    monkeypatch.setattr(services, "board_push_tasks", lambda *, task_ids: pushed.append(set(task_ids)))
    session = SessionFactory(agent=agent, id=SESSION, task=TaskFactory())

    export(agent_client, p.gen_ai_spans(SESSION))

    assert pushed == [{session.task_id}]
