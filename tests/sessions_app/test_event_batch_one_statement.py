"""A batch of new events is stored by one statement on PostgreSQL (stream_events_append_new); replays,
conflicts, bad items and refusals take the general path. Both databases answer the same."""

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.db import connection

from composition.routing import websocket_urlpatterns
from config.pages import ENGINEERS
from sessions_app.models import AgentSession, StreamEvent
from tests.factories import SessionFactory
from tests.page_users import user_in
from tests.worker import WS_TIMEOUT

pytestmark = pytest.mark.django_db

on_postgres = pytest.mark.skipif(connection.vendor != "postgresql", reason="the one-statement path is PostgreSQL's")


def url(session) -> str:
    return f"/api/v1/sessions/{session.pk}/events/"


def stored(session) -> list[tuple]:
    return list(
        StreamEvent.objects.filter(session=session).order_by("seq").values_list("seq", "client_id", "type", "payload")
    )


@on_postgres
def test_a_new_batch_costs_one_statement_and_is_stored_like_any_other(agent_client, session, django_assert_num_queries):
    # given a session with one event already
    agent_client.post(url(session), {"id": "first", "type": "log"}, format="json")
    batch = [
        {"type": "log", "payload": {"line": "é"}},
        {"id": "b-1", "type": "plan_update", "payload": {"steps": ["a"]}, "timestamp": "2026-01-01T10:00:00+02:00"},
        {"id": None, "type": "log"},
    ]

    # when a batch of new, valid events arrives: the key lookup (tests don't cache keys), then one statement
    # (a savepoint around it here, because the test runs in a transaction)
    with django_assert_num_queries(4):
        response = agent_client.post(url(session), batch, format="json")

    # then they are stored with the next seqs, and each answer is its stored row
    assert response.status_code == 201
    assert stored(session)[1:] == [
        (2, None, "log", {"line": "é"}),
        (3, "b-1", "plan_update", {"steps": ["a"]}),
        (4, None, "log", {}),
    ]
    rows = {row.seq: row for row in StreamEvent.objects.filter(session=session)}
    assert rows[3].timestamp.isoformat() == "2026-01-01T08:00:00+00:00"
    assert all(len(row.body_sha256) == 64 for row in rows.values())
    body = response.json()
    assert (body["stored"], body["failed"]) == (3, 0)
    assert [r["item"] for r in body["results"]] == [
        {
            "seq": seq,
            "client_id": rows[seq].client_id,
            "type": rows[seq].type,
            "payload": rows[seq].payload,
            "timestamp": rows[seq].timestamp.isoformat().replace("+00:00", "Z"),
            "created_at": rows[seq].created_at.isoformat().replace("+00:00", "Z"),
        }
        for seq in (2, 3, 4)
    ]
    assert [r["index"] for r in body["results"]] == [0, 1, 2]
    assert AgentSession.objects.get(pk=session.pk).last_event_seq == 4


def test_a_batch_with_a_stored_client_id_answers_it_as_a_replay_and_leaves_no_gap(agent_client, session):
    # given an event stored under a client id
    agent_client.post(url(session), [{"id": "old", "type": "log"}], format="json")

    # when a batch repeats it beside new events (the one statement fails the unique constraint)
    response = agent_client.post(
        url(session), [{"type": "log"}, {"id": "old", "type": "log"}, {"id": "new", "type": "diff"}], format="json"
    )

    # then the stored one is a 200 with its own seq, the new ones follow without a gap
    assert response.status_code == 201
    results = response.json()["results"]
    assert [(r["status"], r["item"]["seq"]) for r in results] == [(201, 2), (200, 1), (201, 3)]
    assert stored(session) == [(1, "old", "log", {}), (2, None, "log", {}), (3, "new", "diff", {})]
    assert AgentSession.objects.get(pk=session.pk).last_event_seq == 3


def test_a_batch_reusing_a_client_id_with_another_body_is_207(agent_client, session):
    agent_client.post(url(session), [{"id": "old", "type": "log"}], format="json")

    response = agent_client.post(url(session), [{"id": "old", "type": "diff"}, {"type": "log"}], format="json")

    assert response.status_code == 207
    assert [r["status"] for r in response.json()["results"]] == [409, 201]
    assert stored(session) == [(1, "old", "log", {}), (2, None, "log", {})]


def test_batch_refusals_are_unchanged_and_write_nothing(agent_client, other_client, agent):
    # given an open session of another agent's view, a finished one of ours, and an id that does not exist
    open_session = SessionFactory(agent=agent)
    finished = SessionFactory(agent=agent, status=AgentSession.Status.COMPLETED)
    batch = [{"type": "log"}, {"id": "x", "type": "log"}]

    # when batches are sent to each
    forbidden = other_client.post(url(open_session), batch, format="json")
    closed = agent_client.post(url(finished), batch, format="json")
    missing = agent_client.post("/api/v1/sessions/no-such-session/events/", batch, format="json")

    # then: 403, 409, 404, and nothing was stored or counted
    assert (forbidden.status_code, closed.status_code, missing.status_code) == (403, 409, 404)
    assert StreamEvent.objects.count() == 0
    assert set(AgentSession.objects.values_list("last_event_seq", flat=True)) == {0}


@pytest.mark.django_db(transaction=True)
def test_a_batch_arrives_on_the_live_page_after_commit(agent, agent_client):
    # given an engineer watching a session (autocommit, as in production)
    SessionFactory(agent=agent, id="live-b")
    engineer = user_in(ENGINEERS)

    async def scenario():
        communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), "/ws/sessions/live-b/")
        communicator.scope["user"] = engineer
        connected, _ = await communicator.connect(timeout=WS_TIMEOUT)
        assert connected
        # when a batch of two new events is posted
        response = await sync_to_async(agent_client.post)(
            "/api/v1/sessions/live-b/events/",
            [{"type": "log", "payload": {"line": "one"}}, {"type": "log", "payload": {"line": "two"}}],
            format="json",
        )
        assert response.status_code == 201
        html = await communicator.receive_from(timeout=WS_TIMEOUT)
        await communicator.disconnect()
        return html

    html = async_to_sync(scenario)()

    # then both arrive in one push
    assert '<li id="event-1" class="event type-log">' in html
    assert '<li id="event-2" class="event type-log">' in html
