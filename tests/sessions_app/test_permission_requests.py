"""Permission requests answered by a person (issue 15, part 2): the question as the hook records it
(tool, redacted input, choices), Allow / Deny with a message from the session page and the card
panel, the long poll the hook reads the answer with, the webhook event, and who may read or answer."""

import time

import pytest
from django.test import Client

from config.pages import PRODUCT_OWNERS
from ledger.models import Event
from sessions_app.models import AgentSession, StreamEvent
from tests.factories import SessionFactory, TaskFactory
from tests.page_users import user_in

pytestmark = pytest.mark.django_db

Status = AgentSession.Status
SECRET = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
URL = "/api/v1/sessions/asks/input-requests/perm-1/"


@pytest.fixture
def asking(agent, agent_client):
    """A session waiting on a permission request, recorded through the API as `switchyard hook` does."""
    SessionFactory(agent=agent, id="asks", status=Status.RUNNING)
    question = {
        "hook": "PermissionRequest",
        "tool_name": "Bash",
        "tool_input": {"command": f"curl -H 'Authorization: token {SECRET}' https://api.github.com"},
        "question": "Allow Bash?",
        "choices": ["allow", "deny"],
    }
    body = {"id": "perm-1", "type": "input_request", "payload": question}
    assert agent_client.post("/api/v1/sessions/asks/events/", body, format="json").status_code == 201
    moved = agent_client.post(
        "/api/v1/sessions/asks/transition/",
        {"status": "waiting_for_input", "reason": "Claude Code asks permission to use Bash"},
        format="json",
    )
    assert moved.status_code == 200
    return AgentSession.objects.get(pk="asks")


def _written(session) -> int:
    return AgentSession.objects.get(pk=session.pk).last_event_seq


def test_the_question_is_stored_redacted_and_the_webhook_event_says_what_is_asked(agent_client, asking):
    body = agent_client.get(URL).json()

    assert body["answered"] is False and body["decision"] is None and body["answer"] is None
    assert body["question"]["tool_name"] == "Bash" and body["question"]["choices"] == ["allow", "deny"]
    assert SECRET not in str(body["question"]["tool_input"])
    assert SECRET not in str(StreamEvent.objects.get(session=asking, client_id="perm-1").payload)
    event = Event.objects.get(name="session.status_changed", subject_id="asks")
    assert event.payload == {
        "from": "running",
        "to": "waiting_for_input",
        "reason": "Claude Code asks permission to use Bash",
        "question": "Allow Bash?",
        "question_seq": 1,
        "tool_name": "Bash",
        "choices": ["allow", "deny"],
        "request_id": "perm-1",
    }


def test_the_session_page_shows_the_tool_and_allow_deny(engineer_client, asking):
    html = engineer_client.get("/sessions/asks/").content.decode()

    assert '<code class="permission-tool">Bash</code>' in html
    assert 'name="decision" value="allow"' in html and 'name="decision" value="deny"' in html
    assert SECRET not in html


def test_allow_from_the_session_page_is_read_back_by_the_agent(engineer_client, agent_client, asking):
    response = engineer_client.post("/sessions/asks/answer/", {"question": "1", "decision": "allow", "answer": ""})

    assert response.status_code == 302
    asking.refresh_from_db()
    assert asking.status == Status.RUNNING
    body = agent_client.get(URL + "?wait=5").json()
    assert (body["answered"], body["decision"], body["answer"], body["answered_by"]) == (True, "allow", "", "eng")
    change = StreamEvent.objects.filter(session=asking, type="status_change").order_by("-seq").first()
    assert change.payload["reason"] == "allowed by user:eng"


def test_deny_with_a_message(engineer_client, agent_client, asking):
    engineer_client.post(
        "/sessions/asks/answer/", {"question": "1", "decision": "deny", "answer": "Use the gh CLI instead."}
    )

    body = agent_client.get(URL).json()
    assert (body["decision"], body["answer"]) == ("deny", "Use the gh CLI instead.")


def test_a_permission_needs_a_decision_and_nothing_is_written_without_one(engineer_client, asking):
    before = _written(asking)

    response = engineer_client.post("/sessions/asks/answer/", {"question": "1", "answer": "sure"})

    assert response.status_code == 400
    assert "Choose Allow or Deny" in response.content.decode()
    assert _written(asking) == before
    assert AgentSession.objects.get(pk="asks").status == Status.WAITING_FOR_INPUT


def test_a_text_question_refuses_a_decision(engineer_client, agent, agent_client):
    SessionFactory(agent=agent, id="text", status=Status.RUNNING)
    agent_client.post(
        "/api/v1/sessions/text/events/", {"type": "input_request", "payload": {"question": "Which?"}}, format="json"
    )
    agent_client.post(
        "/api/v1/sessions/text/transition/", {"status": "waiting_for_input", "reason": "asks"}, format="json"
    )

    response = engineer_client.post("/sessions/text/answer/", {"question": "1", "decision": "allow", "answer": ""})

    assert response.status_code == 400
    assert AgentSession.objects.get(pk="text").status == Status.WAITING_FOR_INPUT


def test_the_long_poll_waits_then_answers_unanswered(agent_client, asking):
    started = time.monotonic()
    body = agent_client.get(URL + "?wait=1").json()

    assert time.monotonic() - started >= 0.9
    assert body["answered"] is False


def test_the_wait_is_bounded(agent_client, asking):
    assert agent_client.get(URL + "?wait=26").status_code == 400
    assert agent_client.get(URL + "?wait=-1").status_code == 400


def test_an_unknown_request_is_404(agent_client, asking):
    assert agent_client.get("/api/v1/sessions/asks/input-requests/nope/").status_code == 404


def test_another_agent_can_neither_read_nor_answer(other_client, asking):
    assert other_client.get(URL).status_code == 403
    before = _written(asking)

    # An agent key is no person: the answer form is a page for signed-in people.
    response = other_client.post("/sessions/asks/answer/", {"decision": "allow"})

    assert response.status_code in (302, 403)
    assert _written(asking) == before
    assert AgentSession.objects.get(pk="asks").status == Status.WAITING_FOR_INPUT


def test_a_product_owner_denies_from_the_card_panel(agent_client, asking):
    owner = Client()
    owner.force_login(user_in(PRODUCT_OWNERS, username="olivia"))
    task = TaskFactory(session=asking)
    html = owner.get(f"/tasks/{task.pk}/", HTTP_HX_REQUEST="true").content.decode()
    assert 'name="decision" value="deny"' in html and '<code class="permission-tool">Bash</code>' in html
    seq = StreamEvent.objects.get(session=asking, client_id="perm-1").seq

    response = owner.post(
        f"/runners/tasks/{task.pk}/answer/",
        {"decision": "deny", "answer": "Not on the shared runner.", "session": "asks", "question": str(seq)},
        HTTP_HX_REQUEST="true",
    )

    assert response.status_code == 200
    body = agent_client.get(URL).json()
    assert (body["decision"], body["answer"], body["answered_by"]) == ("deny", "Not on the shared runner.", "olivia")
    assert AgentSession.objects.get(pk="asks").status == Status.RUNNING
