"""A single event without a client id is stored by one statement (PostgreSQL); every refusal and
every other kind of write still takes the general path and answers as before."""

import pytest
from django.db import connection

from sessions_app.models import AgentSession, StreamEvent
from tests.factories import SessionFactory

pytestmark = pytest.mark.django_db

on_postgres = pytest.mark.skipif(connection.vendor != "postgresql", reason="the one-statement path is PostgreSQL's")


def url(session) -> str:
    return f"/api/v1/sessions/{session.pk}/events/"


@on_postgres
def test_a_plain_event_costs_one_statement_and_is_stored_like_any_other(
    agent_client, session, django_assert_num_queries
):
    # given a session with one event already, written through the general path (a client id)
    agent_client.post(url(session), {"id": "first", "type": "log"}, format="json")

    # when a plain event arrives: the key lookup (tests don't cache keys), then one statement
    with django_assert_num_queries(2):
        response = agent_client.post(
            url(session),
            {"type": "plan_update", "payload": {"steps": ["a", "é"]}, "timestamp": "2026-01-01T10:00:00+02:00"},
            format="json",
        )

    # then it is stored with the next seq, and the answer is the stored row
    assert response.status_code == 201
    row = StreamEvent.objects.get(session=session, seq=2)
    assert (row.type, row.payload, row.client_id) == ("plan_update", {"steps": ["a", "é"]}, None)
    assert row.timestamp.isoformat() == "2026-01-01T08:00:00+00:00"
    assert len(row.body_sha256) == 64
    assert response.json() == {
        "seq": 2,
        "client_id": None,
        "type": "plan_update",
        "payload": {"steps": ["a", "é"]},
        "timestamp": "2026-01-01T08:00:00Z",
        "created_at": row.created_at.isoformat().replace("+00:00", "Z"),
    }
    assert AgentSession.objects.get(pk=session.pk).last_event_seq == 2


def test_the_refusals_are_unchanged_and_write_nothing(agent_client, other_client, agent):
    # given an open session of another agent's, a finished one of ours, and an id that does not exist
    open_session = SessionFactory(agent=agent)
    finished = SessionFactory(agent=agent, status=AgentSession.Status.COMPLETED)

    # when plain events are sent to each
    forbidden = other_client.post(url(open_session), {"type": "log"}, format="json")
    closed = agent_client.post(url(finished), {"type": "log"}, format="json")
    missing = agent_client.post("/api/v1/sessions/no-such-session/events/", {"type": "log"}, format="json")

    # then: 403, 409, 404, and nothing was stored or counted
    assert (forbidden.status_code, closed.status_code, missing.status_code) == (403, 409, 404)
    assert StreamEvent.objects.count() == 0
    assert set(AgentSession.objects.values_list("last_event_seq", flat=True)) == {0}
