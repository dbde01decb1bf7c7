"""The one-statement appends (sessions_app/event_sql.py) write what the general path writes.

The same items appended to two sessions of one agent, alike but for their ids: once through
stream_events_append's statements, once through its general path (the session passed, as the
view does after its lookup). Every row written, and the session's seq counter, must agree in every
column but ids and the time of writing; and the statements take appends for exactly the sessions
the general path takes them for. PostgreSQL only: the statements are PostgreSQL's; on
SQLite stream_events_append always takes the general path.
"""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from config.actors import Actor
from config.idempotency import IncomingItem, canonical_sha256
from sessions_app import services
from sessions_app.event_sql import session_takes_appends, stream_event_insert_one
from sessions_app.models import AgentSession, StreamEvent
from tests.factories import SessionFactory

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the one-statement appends are PostgreSQL's"),
]

WHEN = datetime(2026, 1, 1, 8, 0, tzinfo=UTC)


def _item(index: int, data: dict) -> IncomingItem:
    return IncomingItem(index=index, data=data, body_sha256=canonical_sha256(data), client_id=data.get("id"))


def _rows(session: AgentSession) -> list[dict]:
    rows = StreamEvent.objects.filter(session=session).order_by("seq").values()
    return [{k: v for k, v in row.items() if k not in ("id", "session_id", "created_at")} for row in rows]


def _append_both_ways(agent, items_of) -> tuple[AgentSession, AgentSession, list[str]]:
    """items_of() appended to a fresh session through the statements, and to its twin through the
    general path, each after one event written before; the SQL of the fast append."""
    fast, general = SessionFactory(agent=agent), SessionFactory(agent=agent)
    actor = Actor(agent=agent)
    for session in (fast, general):
        services.stream_events_write(
            session=session, items=[_item(0, {"id": "before", "type": "log", "timestamp": WHEN})]
        )

    with CaptureQueriesContext(connection) as queries:
        services.stream_events_append(actor=actor, session_id=fast.pk, items=items_of())
    services.stream_events_append(actor=actor, session_id=general.pk, items=items_of(), session=general)
    return fast, general, [query["sql"] for query in queries.captured_queries]


ONE = [{"type": "plan_update", "payload": {"steps": ["a", "é"]}, "timestamp": WHEN}]
BATCH = [
    {"type": "log", "payload": {"text": "x" * 300, "nested": {"n": 1.5, "ok": True, "none": None}}, "timestamp": WHEN},
    {"id": "c-1", "type": "diff", "payload": {}, "timestamp": WHEN},
    {"id": "c-2", "type": "tool_call", "payload": {"emoji": "🚀", "quote": "it's"}, "timestamp": WHEN},
]


@pytest.mark.parametrize(("name", "datas"), [("one event", ONE), ("batch", BATCH), ("batch of one", BATCH[1:2])])
def test_both_paths_write_the_same_rows(agent, name, datas):
    fast, general, sql = _append_both_ways(agent, lambda: [_item(i, dict(data)) for i, data in enumerate(datas)])

    # the fast append was one statement (in a savepoint for a batch: the test runs in a transaction)
    statements = [text for text in sql if "SAVEPOINT" not in text]
    assert len(statements) == 1 and statements[0].startswith("WITH s AS (UPDATE")
    assert _rows(fast) == _rows(general)
    assert len(_rows(fast)) == 1 + len(datas)
    assert AgentSession.objects.get(pk=fast.pk).last_event_seq == AgentSession.objects.get(pk=general.pk).last_event_seq


@pytest.mark.parametrize("datas", [ONE, BATCH], ids=["one event", "batch"])
def test_both_paths_stamp_an_event_without_a_timestamp_with_the_time_it_was_written(agent, datas):
    untimed = [{k: v for k, v in data.items() if k != "timestamp"} for data in datas]

    fast, general, _ = _append_both_ways(agent, lambda: [_item(i, dict(data)) for i, data in enumerate(untimed)])

    for session in (fast, general):
        rows = StreamEvent.objects.filter(session=session, seq__gt=1)
        assert len(rows) == len(datas)
        assert all(row.created_at - timedelta(seconds=5) < row.timestamp <= row.created_at for row in rows)


@pytest.mark.parametrize("status", AgentSession.Status.values)
@pytest.mark.parametrize("owner", ["agent", "other_agent"])
def test_the_statements_take_appends_exactly_where_the_general_path_does(request, agent, owner, status):
    session = SessionFactory(agent=request.getfixturevalue(owner), status=status)
    actor = Actor(agent=agent)

    taken = stream_event_insert_one(
        connection,
        session_id=session.pk,
        agent_id=agent.pk,
        type="log",
        payload={},
        timestamp=WHEN,
        now=WHEN,
        sha="",
    )

    general_takes = actor.may_touch_session(session) and not session.is_terminal  # selectors, _require_open
    assert (taken is not None) == general_takes
    assert AgentSession.objects.filter(session_takes_appends(session_id=session.pk, agent_id=agent.pk)).exists() is (
        general_takes
    )
