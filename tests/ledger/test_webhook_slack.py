"""A webhook in Slack's format (ledger/webhook_slack.py): a session waiting for an answer becomes the
message Slack's incoming webhooks accept (``text`` and ``blocks``: the question, who asks, the
session and its task, a button to the session page), delivered to a real HTTP receiver."""

import json

import pytest

from config.actors import Actor
from ledger.events import event_record
from ledger.models import Event, WebhookDelivery, WebhookSubscription
from ledger.webhooks import webhook_deliver, webhook_deliveries_create, webhook_subscribe
from sessions_app.models import AgentSession, StreamEvent
from sessions_app.services import append_system_event, session_transition
from tests.factories import AgentFactory, SessionFactory, TaskFactory
from tests.ledger.receiver import Receiver

pytestmark = pytest.mark.django_db


@pytest.fixture
def receiver():
    receiver = Receiver()
    yield receiver
    receiver.stop()


@pytest.fixture(autouse=True)
def _no_broker(monkeypatch):
    monkeypatch.setattr("ledger.webhooks._deliver_task", lambda: type("T", (), {"delay": lambda self, i: None})())
    monkeypatch.setattr("ledger.events.webhooks_dispatch_task.delay", lambda event_id: None)


def _waiting(question: dict, *, session_id: str = "s-7") -> Event:
    """A session that asks ``question`` and waits, as the hook records it; its webhook event."""
    agent = AgentFactory(slug="claude-1", display_name="Claude One")
    session = SessionFactory(agent=agent, id=session_id)
    TaskFactory(title="Fix the <login> bug", session=session, assignee=agent)
    append_system_event(session=session, type=StreamEvent.Type.INPUT_REQUEST, payload=question)
    session_transition(actor=Actor(agent=agent), session=session, status=AgentSession.Status.WAITING_FOR_INPUT)
    return Event.objects.get(name="session.status_changed", subject_id=session_id)


def _deliver(receiver, question: dict) -> dict:
    subscription = webhook_subscribe(url=receiver.url, format="slack")  # subscribed before the event
    event = _waiting(question)
    webhook_deliveries_create(event_id=event.pk)
    delivery = WebhookDelivery.objects.get(subscription=subscription, event=event)
    assert webhook_deliver(delivery_id=delivery.pk) == "succeeded"
    assert receiver.count() == 1
    request = receiver.received[0]
    assert request.headers["content-type"] == "application/json"
    return json.loads(request.body)


def test_a_permission_question_becomes_a_slack_message_with_a_button_to_the_session(receiver, settings):
    settings.PUBLIC_URL = "https://switchyard.example.com"
    question = {"question": "Allow Bash?", "tool_name": "Bash", "choices": ["allow", "deny"], "tool_input": {}}

    body = _deliver(receiver, question)

    link = "https://switchyard.example.com/sessions/s-7/"
    assert body == {
        "text": f"Claude One asks permission to use Bash: Allow Bash? — {link}",
        "blocks": [
            {
                "type": "section",
                "text": {"type": "mrkdwn", "text": "*Claude One asks permission to use Bash*\n> Allow Bash?"},
            },
            {
                "type": "context",
                "elements": [
                    {"type": "mrkdwn", "text": f"Session `s-7` · Task #{_task_id()} Fix the &lt;login&gt; bug"}
                ],
            },
            {
                "type": "actions",
                "elements": [
                    {
                        "type": "button",
                        "text": {"type": "plain_text", "text": "Answer in Switchyard"},
                        "url": link,
                        "style": "primary",
                    }
                ],
            },
        ],
    }


def _task_id() -> int:
    from board.models import Task

    return Task.objects.get().pk


def test_an_elicitation_without_a_public_url_names_the_page_and_escapes_the_agents_text(receiver, settings):
    settings.PUBLIC_URL = ""
    question = {
        "question": "Pick one <https://evil.example|here> & go",
        "choices": ["accept", "decline", "cancel"],
        "mcp_server_name": "github",
        "requested_schema": {"type": "object", "properties": {"repo": {"type": "string"}}},
    }

    body = _deliver(receiver, question)

    assert (
        body["text"]
        == "Claude One relays a question from the MCP server github: Pick one &lt;https://evil.example|here&gt; &amp; go"
    )
    assert body["blocks"][0]["text"]["text"].endswith("> Pick one &lt;https://evil.example|here&gt; &amp; go")
    assert body["blocks"][-1] == {
        "type": "context",
        "elements": [{"type": "mrkdwn", "text": "Answer on /sessions/s-7/"}],
    }
    assert all(block["type"] != "actions" for block in body["blocks"])


def test_another_event_is_one_line_and_the_switchyard_format_is_unchanged(receiver):
    slack = webhook_subscribe(url=receiver.url, format="slack")
    plain = webhook_subscribe(url=receiver.url)
    event = event_record(name="task.claimed", subject_type="task", subject_id=7, actor="agent:claude-1", payload={})
    webhook_deliveries_create(event_id=event.pk)
    for subscription in (slack, plain):
        webhook_deliver(delivery_id=WebhookDelivery.objects.get(subscription=subscription).pk)

    bodies = {json.loads(r.body).get("text", "switchyard") for r in receiver.received}
    assert bodies == {"task.claimed: task 7 by agent:claude-1", "switchyard"}
    assert WebhookSubscription.objects.get(pk=plain.pk).format == "switchyard"


def test_an_unknown_format_is_refused_and_nothing_is_saved(receiver):
    from config.api.errors import DomainError

    with pytest.raises(DomainError, match="format must be one of switchyard, slack"):
        webhook_subscribe(url=receiver.url, format="teams")
    assert not WebhookSubscription.objects.exists()


def test_the_admin_form_sets_the_format_and_keeps_it_when_not_sent(receiver):
    from ledger.admin import WebhookSubscriptionForm

    form = WebhookSubscriptionForm(data={"url": receiver.url, "event_names": "[]", "format": "slack", "active": True})
    assert form.is_valid(), form.errors
    subscription = form.save()
    again = WebhookSubscriptionForm(
        data={"url": receiver.url, "event_names": "[]", "active": True}, instance=subscription
    )
    assert again.is_valid(), again.errors
    assert again.save().format == "slack"
