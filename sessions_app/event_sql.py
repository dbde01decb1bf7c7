"""PostgreSQL's one-statement appends of stream events (sessions_app/services.py,
stream_events_append, chooses them).

The single-event POST and batches of new events are the busiest writes of the API. Here the
session's next seq is taken and the rows inserted by one UPDATE ... RETURNING feeding an
INSERT: one round trip and no transaction around it, where the general path costs a lookup,
BEGIN, UPDATE, INSERT and COMMIT. The UPDATE matches only a session that takes appends from
the agent (session_takes_appends); when it matches nothing, nothing is written and the caller
takes the general path, which says why (404, 403, 409).

tests/sessions_app/test_event_sql.py runs these and the general path on the same inputs and
compares every row written, and holds session_takes_appends to the general path's checks.
"""

import json
from datetime import datetime
from functools import cache

from django.db import connection
from django.db.models import Q

from sessions_app.models import AgentSession, StreamEvent

_SESSIONS = connection.ops.quote_name(AgentSession._meta.db_table)
_EVENTS = connection.ops.quote_name(StreamEvent._meta.db_table)
_TERMINAL = sorted(AgentSession.TERMINAL)


def session_takes_appends(*, session_id: str, agent_id: int) -> Q:
    """The session named, of this agent, that still takes records. The general path asks the same
    of the row it loads, one part at a time so as to say which failed (selectors: 404, 403;
    services._require_open: 409); tests/sessions_app/test_event_sql.py holds the two together."""
    return Q(pk=session_id, agent_id=agent_id) & ~Q(status__in=_TERMINAL)


_SESSION, _AGENT = "\x00session", -1  # stand-ins, replaced in the compiled parameters


@cache
def _session_takes_appends_sql(vendor: str) -> tuple[str, tuple]:
    """session_takes_appends as the WHERE of an UPDATE of the session table, compiled once."""
    query = AgentSession.objects.filter(session_takes_appends(session_id=_SESSION, agent_id=_AGENT)).query
    sql, params = query.where.as_sql(query.get_compiler(connection=connection), connection)
    return sql, tuple(params)


def _open_session_params(*, session_id: str, agent_id: int) -> list:
    _, params = _session_takes_appends_sql(connection.vendor)
    return [session_id if p == _SESSION else agent_id if p == _AGENT else p for p in params]


_ONE_SQL = (
    f"WITH s AS (UPDATE {_SESSIONS} SET last_event_seq = last_event_seq + 1 "
    "WHERE {where} RETURNING last_event_seq) "
    f"INSERT INTO {_EVENTS} (session_id, seq, type, payload, timestamp, created_at, client_id, body_sha256) "
    "SELECT %s, s.last_event_seq, %s, %s, %s, %s, NULL, %s FROM s RETURNING id, seq"
)


@cache
def _statement(template: str) -> str:
    return template.replace("{where}", _session_takes_appends_sql(connection.vendor)[0])


def stream_event_insert_one(
    db, *, session_id: str, agent_id: int, type: str, payload: dict, timestamp: datetime, now: datetime, sha: str
) -> tuple[int, int] | None:
    """Insert one event without a client id; its (id, seq), or None when the session does not
    take it. Commits by itself in autocommit."""
    prepared = StreamEvent._meta.get_field("payload").get_db_prep_save(payload, db)
    adapt = db.ops.adapt_datetimefield_value
    params = _open_session_params(session_id=session_id, agent_id=agent_id)
    params += [session_id, type, prepared, adapt(timestamp), adapt(now), sha]
    with db.cursor() as cursor:
        cursor.execute(_statement(_ONE_SQL), params)
        return cursor.fetchone()


_BATCH_SQL = (
    f"WITH s AS (UPDATE {_SESSIONS} SET last_event_seq = last_event_seq + %s "
    "WHERE {where} "
    "RETURNING last_event_seq - %s AS base), "
    f"ins AS (INSERT INTO {_EVENTS} (session_id, seq, type, payload, timestamp, created_at, client_id, body_sha256) "
    "SELECT %s, s.base + i.n, i.type, i.payload::jsonb, i.ts, %s, i.cid, i.sha FROM s, "
    "unnest(%s::text[], %s::text[], %s::timestamptz[], %s::text[], %s::text[]) "
    "WITH ORDINALITY AS i(type, payload, ts, cid, sha, n) RETURNING 1) "
    "SELECT s.base, (SELECT count(*) FROM ins) FROM s"
)


def stream_events_insert_batch(
    db,
    *,
    session_id: str,
    agent_id: int,
    types: list[str],
    payloads: list[dict],
    timestamps: list[datetime],
    client_ids: list[str | None],
    shas: list[str],
    now: datetime,
) -> tuple[int, int] | None:
    """Insert a batch in one statement: (the seq before the first, how many were stored), or None
    when the session does not take them. A client id already stored raises IntegrityError, and
    the statement (its UPDATE with it) is rolled back whole."""
    count = len(types)
    params = [count, *_open_session_params(session_id=session_id, agent_id=agent_id), count, session_id, now]
    params += [
        types,
        [json.dumps(payload, ensure_ascii=False) for payload in payloads],
        timestamps,
        client_ids,
        shas,
    ]
    with db.cursor() as cursor:
        cursor.execute(_statement(_BATCH_SQL), params)
        return cursor.fetchone()
