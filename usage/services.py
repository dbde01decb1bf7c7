"""Usage rows written from OTLP exports (usage.extract finds them; this stores them)."""

from django.db import connection, transaction

from board.live import board_push_tasks
from config.actors import Actor
from config.api.errors import DomainError
from sessions_app.models import AgentSession
from usage import usage_sql
from usage.budgets import budgets_evaluate
from usage.extract import UsageItem
from usage.models import UsageRecord
from usage.tool_spans import tool_spans_record

INSERT_BATCH = 500


def usage_records_ingest(*, actor: Actor, items: list[UsageItem]) -> int:
    """Store an export's usage rows for the actor's agent; answers how many it held.

    The session is the one the telemetry names (Claude Code's ``session.id``, which the hook also
    opens as the Switchyard session) when this key may write to it. Otherwise, for a per-run key
    (bound to its run's session, SPEC §8) the run's session: inside a run Claude Code's session id
    is its own uuid, not the run's session id. Otherwise no session: the usage is the agent's
    alone. Never another agent's session. An exporter's retry adds nothing (the idempotency key).
    """
    agent = actor.agent
    if agent is None:
        raise DomainError("OTLP exports are an agent's own: send them with its key.", code="forbidden")
    if not items:
        return 0
    sessions = _sessions_named(actor, {item.external_session_id for item in items} - {""})
    fallback = _bound_session(actor)
    rows, tool_spans, task_ids = [], [], set()
    for item in items:
        session = sessions.get(item.external_session_id, fallback)
        if session is not None:
            if session.task_id is not None:
                task_ids.add(session.task_id)
            if item.source == UsageRecord.Source.OTLP_SPAN and item.tool_name:
                tool_spans.append((session, item))
        rows.append(_row(agent.pk, session, item))
    with transaction.atomic():
        # A row already stored (a retried batch, or the same record twice in one) is skipped by
        # the unique (agent, idempotency_key) constraint, not looked up first.
        _rows_insert(rows)
        # In the same transaction: a warning or an exceeding commits with the usage that caused it.
        budgets_evaluate(agent_id=agent.pk, task_ids=task_ids)
        # The cards of these tasks show what they spent: pushed once, after commit.
        board_push_tasks(task_ids=task_ids)
    if tool_spans:
        tool_spans_record(spans=tool_spans)
    return len(rows)


def _row(agent_id: int, session: AgentSession | None, item: UsageItem) -> dict:
    """The row's values by the model's attribute names (every column but id and received_at)."""
    return {
        "agent_id": agent_id,
        "session_id": session.pk if session is not None else None,
        "task_id": session.task_id if session is not None else None,
        "external_session_id": item.external_session_id,
        "model": item.model,
        "operation": item.operation,
        "tool_name": item.tool_name,
        "input_tokens": item.input_tokens,
        "output_tokens": item.output_tokens,
        "cache_read_tokens": item.cache_read_tokens,
        "cache_creation_tokens": item.cache_creation_tokens,
        "cost_usd": item.cost_usd,
        "duration_ms": item.duration_ms,
        "occurred_at": item.occurred_at,
        "source": item.source,
        "idempotency_key": item.idempotency_key,
    }


def _rows_insert(rows: list[dict]) -> None:
    if connection.vendor == "postgresql":
        usage_sql.usage_records_insert(connection, rows=rows)  # a fifth of bulk_create's CPU: see its docstring
        return
    objs = [UsageRecord(**row) for row in rows]
    UsageRecord.objects.bulk_create(objs, batch_size=INSERT_BATCH, ignore_conflicts=True)


def _sessions_named(actor: Actor, ids: set[str]) -> dict[str, AgentSession]:
    if not ids:
        return {}
    found = AgentSession.objects.filter(pk__in=ids).only("id", "agent_id", "parent_id", "task_id", "status")
    return {session.pk: session for session in found if actor.may_touch_session(session)}


def _bound_session(actor: Actor) -> AgentSession | None:
    bound = actor.bound_session_id
    if bound is None:
        return None
    return AgentSession.objects.filter(pk=bound).only("id", "agent_id", "task_id", "status").first()
