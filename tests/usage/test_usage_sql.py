"""usage/usage_sql.py stores what bulk_create stores, and skips what it skips (PostgreSQL only:
the statement is PostgreSQL's; on SQLite usage.services goes through bulk_create).

The same usage items stored twice, for two agents: once by usage_records_ingest (the statement),
once by UsageRecord instances built field by field and bulk_create(ignore_conflicts=True), as the
service did before. Every column but the id and the time of writing must agree, row for row.
"""

import datetime as dt
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from config.actors import Actor
from tests.factories import AgentFactory, SessionFactory, TaskFactory
from usage import services, usage_sql
from usage.extract import UsageItem
from usage.models import COST_MAX, TOKENS_MAX, UsageRecord

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the one-statement usage insert is PostgreSQL's"),
]

WHEN = dt.datetime(2026, 11, 18, 19, 6, 40, 123456, tzinfo=dt.UTC)


def _items(session_id: str) -> list[UsageItem]:
    return [
        UsageItem(
            source="otlp-log",
            idempotency_key="a" * 64,
            occurred_at=WHEN,
            external_session_id=session_id,
            model="claude-sonnet-4-5-20250929",
            operation="api_request",
            input_tokens=TOKENS_MAX,  # the most a row holds (the caps' constraints)
            output_tokens=340,
            cache_read_tokens=5000,
            cache_creation_tokens=800,
            cost_usd=Decimal(COST_MAX) - Decimal("0.00000001"),
            duration_ms=2345,
        ),
        # No session of this key: the agent's alone; the largest text the columns hold, quotes and non-ASCII.
        UsageItem(
            source="otlp-log",
            idempotency_key="b" * 64,
            occurred_at=WHEN + dt.timedelta(microseconds=1),
            external_session_id="é\"'\\{},[]" + "x" * 119,
            model="m" * 200,
            operation="api_request",
            cost_usd=Decimal("0.00000001"),
            duration_ms=None,
        ),
        UsageItem(
            source="otlp-span",
            idempotency_key="c" * 64,
            occurred_at=WHEN,
            external_session_id=session_id,
            operation="execute_tool",
            tool_name="Bash",
            duration_ms=0,
        ),
        # The first again in the same export: stored once, as ignore_conflicts does.
        UsageItem(source="otlp-log", idempotency_key="a" * 64, occurred_at=WHEN, model="other"),
    ]


def _stored(agent) -> list[dict]:
    rows = UsageRecord.objects.filter(agent=agent).order_by("idempotency_key").values()
    return [{k: v for k, v in row.items() if k not in ("id", "agent_id", "session_id", "received_at")} for row in rows]


def _bulk_create_as_before(agent, session, items: list[UsageItem]) -> None:
    """The ORM path the statement replaced, written out with keywords (not sharing services' rows)."""
    rows = []
    for item in items:
        mine = session if item.external_session_id == session.pk else None
        rows.append(
            UsageRecord(
                agent=agent,
                session_id=mine.pk if mine else None,
                task_id=mine.task_id if mine else None,
                external_session_id=item.external_session_id,
                model=item.model,
                operation=item.operation,
                tool_name=item.tool_name,
                input_tokens=item.input_tokens,
                output_tokens=item.output_tokens,
                cache_read_tokens=item.cache_read_tokens,
                cache_creation_tokens=item.cache_creation_tokens,
                cost_usd=item.cost_usd,
                duration_ms=item.duration_ms,
                occurred_at=item.occurred_at,
                source=item.source,
                idempotency_key=item.idempotency_key,
            )
        )
    UsageRecord.objects.bulk_create(rows, ignore_conflicts=True)


def test_the_statement_stores_what_bulk_create_stores():
    # given two agents, each with a session on a task
    fast_agent, orm_agent = AgentFactory(slug="fast"), AgentFactory(slug="orm")
    fast_session = SessionFactory(agent=fast_agent, task=TaskFactory())
    orm_session = SessionFactory(agent=orm_agent, task=fast_session.task)

    # when the same items are stored by the service (the statement) and by bulk_create
    with CaptureQueriesContext(connection) as queries:
        services.usage_records_ingest(actor=Actor(agent=fast_agent), items=_items(fast_session.pk))
    _bulk_create_as_before(orm_agent, orm_session, _items(orm_session.pk))

    # then one statement stored rows equal in every column but ids and the time of writing
    assert sum("json_populate_recordset" in q["sql"] for q in queries.captured_queries) == 1
    fast, orm = _stored(fast_agent), _stored(orm_agent)
    assert [r["idempotency_key"][0] for r in fast] == ["a", "b", "c"]
    assert fast[0]["model"] == "claude-sonnet-4-5-20250929"  # the first of the two "a"s
    assert [r["task_id"] for r in fast] == [fast_session.task_id, None, fast_session.task_id]
    assert _without_session(fast, fast_session.pk) == _without_session(orm, orm_session.pk)
    sessions = UsageRecord.objects.filter(agent=fast_agent).order_by("idempotency_key").values_list("session_id")
    assert [s for (s,) in sessions] == [fast_session.pk, None, fast_session.pk]


def _without_session(rows: list[dict], session_id: str) -> list[dict]:
    return [{**r, "external_session_id": r["external_session_id"].replace(session_id, "S")} for r in rows]


def test_a_retry_adds_nothing_and_another_agent_stores_its_own():
    # given an export stored once
    agent, other = AgentFactory(slug="a1"), AgentFactory(slug="a2")
    session = SessionFactory(agent=agent)
    services.usage_records_ingest(actor=Actor(agent=agent), items=_items(session.pk))
    before = _stored(agent)

    # when it is sent again, and the same records by another agent
    services.usage_records_ingest(actor=Actor(agent=agent), items=_items(session.pk))
    services.usage_records_ingest(actor=Actor(agent=other), items=_items(session.pk))

    # then the first agent's rows are unchanged and the other's are its own (no session: not its)
    assert _stored(agent) == before
    assert UsageRecord.objects.filter(agent=other).count() == 3
    assert not UsageRecord.objects.filter(agent=other, session__isnull=False).exists()


def test_the_columns_are_the_models():
    # A field added to UsageRecord is in the statement at once, and services' rows must then carry it.
    fields = [f.attname for f in UsageRecord._meta.concrete_fields if f.attname not in ("id", "received_at")]
    assert fields == usage_sql.ATTNAMES
    assert list(services._row(1, None, _items("s")[0])) == fields
