"""An MCP server's elicitation answered by a person while `switchyard hook` waits (issue 15, part 2):
a real hook process reads Claude Code's Elicitation payload, records the question with its requested
schema against the live server and waits; a person fills in the form the session page builds from
the schema; the hook prints Claude Code's Elicitation output (action and typed content)."""

import time

import httpx
import pytest

from sessions_app.models import AgentSession, StreamEvent
from tests.client.hook_events import SID, event
from tests.client.hook_person import (
    answer_in_thread,
    hook_output,
    person_answers,
    signed_in_engineer,
    wait_until_waiting,
)

pytestmark = pytest.mark.django_db(transaction=True)

SCHEMA = {
    "type": "object",
    "properties": {
        "repo": {"type": "string", "title": "Repository", "description": "owner/name"},
        "priority": {"type": "string", "enum": ["low", "high"], "enumNames": ["Low", "High"]},
        "estimate": {"type": "number", "title": "Estimate (days)"},
        "count": {"type": "integer"},
        "notify": {"type": "boolean", "title": "Notify the owners"},
    },
    "required": ["repo", "priority"],
}
ELICITATION = event(
    "Elicitation",
    mcp_server_name="github",
    message="Where should the issue go?",
    mode="form",
    elicitation_id="elic-7",
    requested_schema=SCHEMA,
)


def _question() -> StreamEvent:
    return StreamEvent.objects.get(session_id=SID, payload__hook="Elicitation")


def test_the_page_shows_a_form_from_the_schema_and_the_hook_prints_the_typed_content(sy_server, agent_key, start_hook):
    # given a hook waiting on an MCP server's question
    proc = start_hook(ELICITATION, url=sy_server.url, key=agent_key, timeout=40)
    wait_until_waiting(SID, proc)
    cookies = signed_in_engineer()
    page = httpx.get(f"{sy_server.url}/sessions/{SID}/", cookies=cookies).text
    assert "Where should the issue go?" in page
    for field in ('name="field:repo"', 'name="field:priority"', 'name="field:estimate"', 'name="field:notify"'):
        assert field in page
    assert 'type="number"' in page and 'type="checkbox"' in page and '<option value="high">High</option>' in page

    # when the person fills it in and accepts
    form = {"decision": "accept", "answer": "", "field:repo": "dev/webapp", "field:priority": "high"}
    form |= {"field:estimate": "1.5", "field:count": "3", "field:notify": "on"}
    person, answered = answer_in_thread(sy_server.url, SID, cookies, **form)
    output, err = hook_output(proc)
    person.join(10)

    # then the hook prints the accept with the values typed as the schema says
    assert answered["response"].status_code == 302
    content = {"repo": "dev/webapp", "priority": "high", "estimate": 1.5, "count": 3, "notify": True}
    assert output == {"hookSpecificOutput": {"hookEventName": "Elicitation", "action": "accept", "content": content}}
    assert AgentSession.objects.get(pk=SID).status == AgentSession.Status.RUNNING
    question = _question()
    assert question.payload["choices"] == ["accept", "decline", "cancel"]
    assert question.payload["requested_schema"] == SCHEMA
    answer = StreamEvent.objects.get(session_id=SID, payload__in_reply_to=question.seq)
    assert answer.payload["decision"] == "accept" and answer.payload["content"] == content


def test_a_missing_required_field_is_refused_and_the_hook_keeps_waiting(sy_server, agent_key, start_hook):
    proc = start_hook(ELICITATION, url=sy_server.url, key=agent_key, timeout=40)
    wait_until_waiting(SID, proc)
    cookies = signed_in_engineer()

    refused = person_answers(sy_server.url, SID, cookies, decision="accept", **{"field:priority": "low"})

    assert refused.status_code == 400
    assert "Repository is required" in refused.text
    assert not StreamEvent.objects.filter(session_id=SID, payload__has_key="answer").exists()
    assert proc.poll() is None
    # a person who declines instead: the hook says so, without content
    assert person_answers(sy_server.url, SID, cookies, decision="decline").status_code == 302
    output, _ = hook_output(proc)
    assert output == {"hookSpecificOutput": {"hookEventName": "Elicitation", "action": "decline"}}


@pytest.mark.parametrize(("default", "action"), [("", "cancel"), ("decline", "decline")])
def test_nobody_answers_the_configured_default_is_printed(sy_server, agent_key, start_hook, default, action):
    env = {"SWITCHYARD_ELICITATION_DEFAULT": default} if default else {}
    started = time.monotonic()
    proc = start_hook(ELICITATION, url=sy_server.url, key=agent_key, timeout=2, **env)

    output, _ = hook_output(proc)

    assert 1.5 <= time.monotonic() - started < 15
    assert output == {"hookSpecificOutput": {"hookEventName": "Elicitation", "action": action}}
    session = AgentSession.objects.get(pk=SID)
    assert session.status == AgentSession.Status.RUNNING
    change = StreamEvent.objects.filter(session=session, type="status_change").order_by("-seq").first()
    assert change.payload["reason"] == f"nobody answered the MCP server's question within 2 s: {action}"


def test_the_answer_api_carries_the_content_and_refuses_another_agent(sy_server, agent_key, other_key, start_hook):
    proc = start_hook(ELICITATION, url=sy_server.url, key=agent_key, timeout=40)
    wait_until_waiting(SID, proc)
    request_id = _question().client_id
    url = f"{sy_server.url}/api/v1/sessions/{SID}/input-requests/{request_id}/"

    theirs = httpx.get(url, headers={"Authorization": f"Bearer {other_key}"})
    person_answers(
        sy_server.url, SID, signed_in_engineer(), decision="accept", **{"field:repo": "a/b"} | {"field:priority": "low"}
    )
    hook_output(proc)
    mine = httpx.get(url, headers={"Authorization": f"Bearer {agent_key}"}).json()

    assert theirs.status_code == 403
    assert mine["decision"] == "accept" and mine["content"] == {"repo": "a/b", "priority": "low", "notify": False}
    assert mine["question"]["mcp_server_name"] == "github"
