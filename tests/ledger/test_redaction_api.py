"""Every field an agent writes is redacted on ingest, through the real API, on both databases.

Each shape of the corpus goes through each kind of field; the secret must be in neither the
stored row nor the answer, and the words around it must be in both. On PostgreSQL the single
event and the batch take the one-statement fast paths (sessions_app/services.py); with a client id
or a bad item beside them they take the general path: both are covered.
"""

import hashlib
import json

import pytest
from django.test import Client

from board.models import Task
from config.pages import ENGINEERS
from config.redaction import REDACTED
from ledger.models import ToolInvocation
from sessions_app.models import AgentSession, Checkpoint, Milestone, StreamEvent
from sessions_app.selectors import session_question
from tests.factories import SessionFactory
from tests.ledger.secret_corpus import AFTER, BEFORE, CORPUS
from tests.page_users import user_in

pytestmark = pytest.mark.django_db


def _post(client, url, body):
    return client.post(url, data=json.dumps(body), content_type="application/json")


def _events(session_id) -> str:
    return json.dumps([e.payload for e in StreamEvent.objects.filter(session_id=session_id).order_by("seq")])


def event_single(clients, session, text):
    response = _post(
        clients["agent"], f"/api/v1/sessions/{session.pk}/events/", {"type": "log", "payload": {"line": text}}
    )
    assert response.status_code == 201
    listed = clients["agent"].get(f"/api/v1/sessions/{session.pk}/events/")
    return response.content.decode() + listed.content.decode(), _events(session.pk)


def event_batch(clients, session, text):
    body = [{"type": "log", "payload": {"line": "first"}}, {"type": "tool_finished", "payload": {"out": [text]}}]
    response = _post(clients["agent"], f"/api/v1/sessions/{session.pk}/events/", body)
    assert response.status_code == 201
    return response.content.decode(), _events(session.pk)


def event_with_client_id(clients, session, text):
    body = {"id": "evt-1", "type": "log", "payload": {"line": text}}
    response = _post(clients["agent"], f"/api/v1/sessions/{session.pk}/events/", body)
    replay = _post(clients["agent"], f"/api/v1/sessions/{session.pk}/events/", body)
    assert (response.status_code, replay.status_code) == (201, 200)  # the replay matches the raw body
    return response.content.decode() + replay.content.decode(), _events(session.pk)


def event_batch_with_a_bad_item(clients, session, text):
    body = [{"type": "log", "payload": {"line": text}}, {"type": "no-such-type"}]
    response = _post(clients["agent"], f"/api/v1/sessions/{session.pk}/events/", body)
    assert response.status_code == 207
    return response.content.decode(), _events(session.pk)


def input_request_question(clients, session, text):
    body = {"type": "input_request", "payload": {"question": text}}
    response = _post(clients["agent"], f"/api/v1/sessions/{session.pk}/events/", body)
    assert response.status_code == 201
    return response.content.decode(), _events(session.pk)


def input_request_answer(clients, session, text):
    AgentSession.objects.filter(pk=session.pk).update(status=AgentSession.Status.WAITING_FOR_INPUT)
    question = session_question(session=session)  # the one the page shows, which its form sends
    form = {"question": question.seq if question else "", "answer": text}
    response = clients["engineer"].post(f"/sessions/{session.pk}/answer/", form)
    assert response.status_code in (200, 302)
    page = clients["engineer"].get(f"/sessions/{session.pk}/")
    assert page.status_code == 200
    stored = _events(session.pk)
    assert '"answer"' in stored
    return page.content.decode(), stored


def tool_call_input(clients, session, text):
    body = {"tool_name": "Bash", "input": {"command": text}}
    response = _post(clients["agent"], f"/api/v1/sessions/{session.pk}/tool-calls/", body)
    assert response.status_code == 201
    return response.content.decode(), ToolInvocation.objects.get().input_summary


def tool_call_output_and_error(clients, session, text):
    body = {"tool_name": "Bash", "status": "failure", "output": {"stderr": text}, "error": text}
    response = _post(clients["agent"], f"/api/v1/sessions/{session.pk}/tool-calls/", body)
    assert response.status_code == 201
    call = ToolInvocation.objects.get()
    return response.content.decode(), call.output_summary + call.error


def tool_call_finish(clients, session, text):
    started = _post(clients["agent"], f"/api/v1/sessions/{session.pk}/tool-calls/", {"tool_name": "Bash"})
    call_id = started.json()["id"]
    response = clients["agent"].patch(
        f"/api/v1/tool-calls/{call_id}/",
        data=json.dumps({"status": "success", "output": text}),
        content_type="application/json",
    )
    assert response.status_code == 200
    return response.content.decode(), ToolInvocation.objects.get().output_summary


def milestone(clients, session, text):
    response = _post(clients["agent"], f"/api/v1/sessions/{session.pk}/milestones/", {"text": text})
    assert response.status_code == 201
    return response.content.decode(), Milestone.objects.get().text + _events(session.pk)


def checkpoint(clients, session, text):
    body = {"state": {"plan": ["build", text], "notes": {"log": text}}}
    response = _post(clients["agent"], f"/api/v1/sessions/{session.pk}/checkpoints/", body)
    assert response.status_code == 201
    latest = clients["agent"].get(f"/api/v1/sessions/{session.pk}/checkpoints/")
    return response.content.decode() + latest.content.decode(), json.dumps(Checkpoint.objects.get().state)


def session_intent_and_metadata(clients, session, text):
    body = {"id": "opened", "intent": text, "metadata": {"env": {"note": text}}, "labels": ["x"]}
    response = _post(clients["agent"], "/api/v1/sessions/", body)
    assert response.status_code == 201
    stored = AgentSession.objects.get(pk="opened")
    return response.content.decode(), stored.intent + json.dumps(stored.metadata)


def session_transition_reason(clients, session, text):
    url = f"/api/v1/sessions/{session.pk}/transition/"
    response = _post(clients["agent"], url, {"status": "failed", "reason": text})
    assert response.status_code == 200
    return response.content.decode(), _events(session.pk)


def task_fields(clients, session, text):
    response = _post(clients["orchestrator"], "/api/v1/tasks/", {"title": f"Deploy {text}", "description": text})
    assert response.status_code == 201
    task = Task.objects.get()
    return response.content.decode(), task.title + task.description


def task_failure(clients, session, text):
    created = _post(clients["orchestrator"], "/api/v1/tasks/", {"title": "Deploy"})
    task_id = created.json()["id"]
    assert _post(clients["orchestrator"], f"/api/v1/tasks/{task_id}/claim/", {}).status_code == 200
    response = _post(clients["orchestrator"], f"/api/v1/tasks/{task_id}/fail/", {"error": text})
    assert response.status_code == 200
    return response.content.decode(), Task.objects.get().error


FIELD_KINDS = [
    event_single,
    event_batch,
    event_with_client_id,
    event_batch_with_a_bad_item,
    input_request_question,
    input_request_answer,
    tool_call_input,
    tool_call_output_and_error,
    tool_call_finish,
    milestone,
    checkpoint,
    session_intent_and_metadata,
    session_transition_reason,
    task_fields,
    task_failure,
]


@pytest.fixture
def clients(agent_client, orchestrator_client):
    engineer = Client()
    engineer.force_login(user_in(ENGINEERS, username="eng"))
    return {"agent": agent_client, "orchestrator": orchestrator_client, "engineer": engineer}


@pytest.fixture
def running(agent):
    return SessionFactory(agent=agent, id="sess-1", status=AgentSession.Status.RUNNING)


@pytest.mark.parametrize("kind", FIELD_KINDS, ids=[k.__name__ for k in FIELD_KINDS])
@pytest.mark.parametrize(("name", "text", "secret"), CORPUS, ids=[c[0] for c in CORPUS])
def test_a_secret_is_neither_stored_nor_answered(clients, running, kind, name, text, secret):
    answered, stored = kind(clients, running, text)

    assert secret not in stored
    assert secret not in answered
    assert REDACTED in stored
    # The words around the secret survive (in the stored JSON, line breaks are escaped).
    assert BEFORE in stored
    assert AFTER in stored


def test_values_under_secret_keys_are_redacted_in_payloads_metadata_and_state(clients, running):
    config = {"api_key": "k-8c1f2e", "Authorization": "Basic YWxhZGRpbjpvcGVu", "region": "eu-west-1", "retries": 3}

    event = _post(clients["agent"], f"/api/v1/sessions/{running.pk}/events/", {"type": "log", "payload": config})
    state = _post(clients["agent"], f"/api/v1/sessions/{running.pk}/checkpoints/", {"state": {"config": config}})
    opened = _post(clients["agent"], "/api/v1/sessions/", {"id": "s2", "metadata": {"config": config}})

    expected = {"api_key": REDACTED, "Authorization": REDACTED, "region": "eu-west-1", "retries": 3}
    assert (event.status_code, state.status_code, opened.status_code) == (201, 201, 201)
    assert StreamEvent.objects.get(session=running).payload == expected
    assert event.json()["payload"] == expected
    assert Checkpoint.objects.get().state == {"config": expected}
    assert AgentSession.objects.get(pk="s2").metadata == {"config": expected}


def test_a_tool_calls_input_hash_is_of_the_raw_input(clients, running):
    raw = {"command": "curl -u deploy:Hx7pQ2mZ9vLw https://ci.example.com"}

    response = _post(
        clients["agent"], f"/api/v1/sessions/{running.pk}/tool-calls/", {"tool_name": "Bash", "input": raw}
    )

    canonical = json.dumps(raw, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    call = ToolInvocation.objects.get()
    assert response.status_code == 201
    assert "Hx7pQ2mZ9vLw" not in call.input_summary
    assert call.input_sha256 == hashlib.sha256(canonical.encode()).hexdigest()


def test_a_redacted_value_still_fits_its_column(clients, running):
    # given a repo field at its 500-character limit whose secret is shorter than the marker
    repo = "r" * 489 + " token=abc"

    response = _post(clients["agent"], "/api/v1/sessions/", {"id": "s3", "repo": repo})

    assert response.status_code == 201
    stored = AgentSession.objects.get(pk="s3").repo
    assert stored == ("r" * 489 + f" token={REDACTED}")[:500]
    assert len(stored) == 500
