"""Sessions and agents in the admin: the cancel action goes through session_transition."""

import pytest
from django.utils import timezone

from ledger.models import Event
from sessions_app.models import Agent, AgentSession, StreamEvent
from tests.admin.factories import admin_url
from tests.factories import AgentFactory, SessionFactory

pytestmark = pytest.mark.django_db
Status = AgentSession.Status


def _run_action(client, model, action: str, pks):
    return client.post(admin_url(model, "changelist"), {"action": action, "_selected_action": pks}, follow=True)


def test_cancel_action_cancels_open_sessions_and_skips_final_ones(admin_client, agent):
    # given
    running = SessionFactory(agent=agent, status=Status.RUNNING)
    waiting = SessionFactory(agent=agent, status=Status.WAITING_FOR_INPUT)
    ended_at = timezone.now()
    completed = SessionFactory(agent=agent, status=Status.COMPLETED, ended_at=ended_at)
    not_selected = SessionFactory(agent=agent, status=Status.RUNNING)

    # when
    response = _run_action(admin_client, AgentSession, "cancel_sessions", [running.pk, waiting.pk, completed.pk])

    # then
    assert [m.message for m in response.context["messages"]] == ["2 session(s) cancelled; 1 already final."]
    statuses = dict(AgentSession.objects.values_list("pk", "status"))
    assert statuses == {
        running.pk: Status.CANCELLED,
        waiting.pk: Status.CANCELLED,
        completed.pk: Status.COMPLETED,
        not_selected.pk: Status.RUNNING,
    }
    assert AgentSession.objects.get(pk=completed.pk).ended_at == ended_at
    assert AgentSession.objects.get(pk=running.pk).ended_at is not None
    # and the service wrote its records, with the person as actor and the admin as reason
    ended = Event.objects.filter(name="session.ended").order_by("subject_id")
    assert [(e.subject_id, e.actor, e.payload["reason"]) for e in ended] == sorted(
        (pk, "user:admin", "cancelled from the admin") for pk in (running.pk, waiting.pk)
    )
    assert StreamEvent.objects.filter(type=StreamEvent.Type.STATUS_CHANGE).count() == 2


def test_cancel_action_with_only_final_sessions_changes_nothing(admin_client, agent):
    failed = SessionFactory(agent=agent, status=Status.FAILED, ended_at=timezone.now())

    response = _run_action(admin_client, AgentSession, "cancel_sessions", [failed.pk])

    assert [m.message for m in response.context["messages"]] == ["0 session(s) cancelled; 1 already final."]
    assert AgentSession.objects.get(pk=failed.pk).status == Status.FAILED
    assert Event.objects.count() == 0
    assert StreamEvent.objects.count() == 0


def test_sessions_cannot_be_added_or_deleted_in_the_admin(admin_client, session):
    assert admin_client.get(admin_url(AgentSession, "add")).status_code == 403
    assert admin_client.post(admin_url(AgentSession, "delete", session.pk), {"post": "yes"}).status_code == 403
    assert AgentSession.objects.filter(pk=session.pk).exists()


def test_session_change_form_keeps_status_and_counters(admin_client, session):
    # given
    before = AgentSession.objects.values("status", "last_event_seq", "agent_id", "ended_at").get(pk=session.pk)

    # when a person edits the intent and tries to change the status, counters and id
    response = admin_client.post(
        admin_url(AgentSession, "change", session.pk),
        {
            "intent": "New intent",
            "labels": "[]",
            "metadata": "{}",
            "status": "completed",
            "last_event_seq": "99",
            "id": "hijacked",
        },
    )

    # then only the editable field changed
    assert response.status_code == 302
    after = AgentSession.objects.get(pk=session.pk)
    assert after.intent == "New intent"
    assert AgentSession.objects.values("status", "last_event_seq", "agent_id", "ended_at").get(pk=session.pk) == before
    assert not AgentSession.objects.filter(pk="hijacked").exists()


def test_pause_and_activate_actions_change_only_selected_agents(admin_client):
    # given
    first, second = AgentFactory(slug="first"), AgentFactory(slug="second")
    other = AgentFactory(slug="other")

    # when
    paused = _run_action(admin_client, Agent, "pause_agents", [first.pk, second.pk])

    # then
    assert [m.message for m in paused.context["messages"]] == ["2 agent(s) paused."]
    assert dict(Agent.objects.values_list("slug", "status")) == {
        "first": Agent.Status.PAUSED,
        "second": Agent.Status.PAUSED,
        "other": Agent.Status.ACTIVE,
    }

    # when
    activated = _run_action(admin_client, Agent, "activate_agents", [first.pk, other.pk])

    # then the already active one is not counted
    assert [m.message for m in activated.context["messages"]] == ["1 agent(s) activated."]
    assert dict(Agent.objects.values_list("slug", "status")) == {
        "first": Agent.Status.ACTIVE,
        "second": Agent.Status.PAUSED,
        "other": Agent.Status.ACTIVE,
    }
