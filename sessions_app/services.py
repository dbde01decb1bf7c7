"""Writes for agents and sessions: open, transition, heartbeat, events, checkpoints, milestones."""

import json
import re
import uuid
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from config.actors import Actor
from config.api.errors import DomainError
from config.domain_events import domain_event_record
from config.idempotency import IncomingItem, ItemResult, resolve_replays
from config.run_scope import require_task
from config.single_statement import single_statement_atomic
from sessions_app import selectors
from sessions_app.event_sql import stream_event_insert_one, stream_events_insert_batch
from sessions_app.live import session_push
from sessions_app.liveness import agent_alive
from sessions_app.models import Agent, AgentSession, Checkpoint, Milestone, StreamEvent
from sessions_app.permission_requests import waiting_question_summary
from sessions_app.session_hooks import (
    agent_alive_hooks_run,
    session_opened,
    session_status_changed,
    session_task_gates_run,
    session_workspace_create,
    session_workspace_discard_empty,
    session_workspace_shared,
)

Status = AgentSession.Status

# The status machine. Terminal states have no way out.
ALLOWED_TRANSITIONS: dict[str, tuple[str, ...]] = {
    Status.PLANNING: (Status.RUNNING, Status.FAILED, Status.CANCELLED),
    Status.RUNNING: (Status.WAITING_FOR_INPUT, Status.COMPLETED, Status.FAILED, Status.CANCELLED),
    Status.WAITING_FOR_INPUT: (Status.RUNNING, Status.COMPLETED, Status.FAILED, Status.CANCELLED),
    Status.COMPLETED: (),
    Status.FAILED: (),
    Status.CANCELLED: (),
}

SESSION_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
WRITE_RETRIES = 3


def session_generate_id() -> str:
    return f"session_{timezone.now():%Y%m%d_%H%M%S}_{uuid.uuid4().hex[:8]}"


def agent_heartbeat(*, agent: Agent) -> Agent:
    """Record that the agent is alive. An agent marked stale comes back to active; a paused one stays paused."""
    agent_alive(agent=agent, now=timezone.now())  # what any request of the agent does too (liveness.py)
    agent.refresh_from_db(fields=["last_heartbeat_at", "status"])
    return agent


def session_open(
    *,
    actor: Actor,
    agent: Agent,
    session_id: str | None = None,
    intent: str = "",
    labels: list[str] | None = None,
    metadata: dict | None = None,
    repo: str = "",
    branch: str = "",
    pr_url: str = "",
    parent: AgentSession | None = None,
    task=None,
    status: str = Status.PLANNING,
    workspace_kind: str = "session",
) -> tuple[AgentSession, bool]:
    """Open a session with its workspace, or return the one already open under this id
    (True when created).

    Re-opening an existing id with the same agent is how a crashed agent resumes; an id
    that belongs to another agent is a conflict. ``workspace_kind`` is ``session`` (a new
    folder of its own) or ``shared`` (the flat default workspace).
    """
    if status not in (Status.PLANNING, Status.RUNNING):
        raise DomainError("A session starts as 'planning' or 'running'.", code="invalid")
    if workspace_kind not in ("session", "shared"):
        raise DomainError("workspace must be 'session' or 'shared'.")
    generated = session_id is None
    if session_id is None:
        session_id = session_generate_id()
    elif not SESSION_ID_RE.match(session_id):
        raise DomainError("Session id must be 1-128 characters of letters, digits, '.', '_', ':' or '-'.")
    if parent is not None and not actor.owns(parent.agent_id):
        raise DomainError("The parent session belongs to another agent.", code="forbidden")
    if task is not None:
        require_task(actor=actor, task_id=task.pk)  # a per-run key names only its run's task (SPEC §8)
        session_task_gates_run(task=task, agent=agent)  # the board's: not one another agent holds

    existing = AgentSession.objects.filter(pk=session_id).first()
    if existing is not None:
        return _session_reopen(actor=actor, agent=agent, session=existing), False
    bound = actor.bound_session_id
    if bound is not None and (parent is None or parent.pk != bound):
        # A per-run key works inside its run's session: the only sessions it opens are that one's children.
        raise DomainError(
            f"This key is bound to session {bound!r}: it opens only child sessions of it (parent={bound!r}).",
            code="forbidden",
        )

    now = timezone.now()
    workspace = None
    try:
        with transaction.atomic():
            if workspace_kind == "shared":
                workspace = session_workspace_shared()
            else:
                # The folder name is the server's: a client-chosen id never becomes a path.
                workspace = session_workspace_create(folder_name=session_id if generated else None)
            session = AgentSession.objects.create(
                workspace=workspace,
                id=session_id,
                agent=agent,
                status=status,
                intent=intent,
                labels=labels or [],
                metadata=metadata or {},
                repo=repo,
                branch=branch,
                pr_url=pr_url,
                parent=parent,
                task=task,
                started_at=now,
                last_heartbeat_at=now,
            )
            domain_event_record(
                name="session.started",
                subject_type="session",
                subject_id=session.pk,
                actor=actor.label,
                payload={"agent": agent.slug, "intent": intent[:500], "status": status},
            )
            if task is not None:
                session_opened(session=session)
    except IntegrityError:
        # Another request opened the same id between our look and our insert.
        if workspace is not None and workspace.kind == "session":
            session_workspace_discard_empty(workspace=workspace)
        existing = AgentSession.objects.filter(pk=session_id).first()
        if existing is None:
            raise
        return _session_reopen(actor=actor, agent=agent, session=existing), False
    return session, True


def _session_reopen(*, actor: Actor, agent: Agent, session: AgentSession) -> AgentSession:
    if session.agent_id != agent.pk or not actor.owns(session.agent_id):
        raise DomainError(f"Session {session.pk!r} already exists and belongs to another agent.", code="conflict")
    if not actor.may_touch_session(session):
        raise DomainError(
            f"This key is bound to session {actor.bound_session_id!r}; session {session.pk!r} is not it "
            "nor one of its children.",
            code="forbidden",
        )
    return session


@transaction.atomic
def session_transition(
    *, actor: Actor, session: AgentSession, status: str, reason: str = ""
) -> tuple[AgentSession, bool]:
    """Move a session along its status machine; True if it moved.

    Locks the session row. Asking for the status it already has is a no-op, so a retried
    request is safe; any move the machine does not allow is a 409 naming the allowed ones.
    """
    if status not in Status.values:
        raise DomainError(f"Unknown status {status!r}; one of {', '.join(Status.values)}.", code="invalid")
    session = AgentSession.objects.select_for_update().get(pk=session.pk)
    if session.status == status:
        return session, False
    allowed = ALLOWED_TRANSITIONS[session.status]
    if status not in allowed:
        raise DomainError(
            f"Cannot move session from {session.status!r} to {status!r}; allowed: "
            + (", ".join(allowed) if allowed else f"none, {session.status!r} is final")
            + ".",
            code="conflict",
            extra={"allowed": list(allowed), "current": session.status},
        )
    previous = session.status
    now = timezone.now()
    session.status = status
    update_fields = ["status", "updated_at"]
    if status in AgentSession.TERMINAL:
        session.ended_at = now
        update_fields.append("ended_at")
    session.save(update_fields=update_fields)
    event = append_system_event(
        session=session, type=StreamEvent.Type.STATUS_CHANGE, payload={"from": previous, "to": status, "reason": reason}
    )
    session_push(session_id=session.pk, seqs=(event.seq, event.seq), status=True)
    # The board's part: its cards' "waiting for input" badge, and a cancelled or failed session's
    # tasks back to the board (composition/session_wiring.py).
    session_status_changed(actor=actor, session=session, previous=previous, status=status)
    change = {"from": previous, "to": status, "reason": reason[:500]}
    if status == Status.WAITING_FOR_INPUT:
        # Webhooks (a person's phone) say what is asked: the question, and the tool for a permission.
        change.update(waiting_question_summary(session=session))
    domain_event_record(
        name="session.ended" if session.ended_at else "session.status_changed",
        subject_type="session",
        subject_id=session.pk,
        actor=actor.label,
        payload=change,
    )
    return session, True


def session_heartbeat(*, session: AgentSession) -> AgentSession:
    """The session and its agent are alive. Like the agent's own heartbeat it renews the agent's
    worktree leases: an agent the reaper counts as alive must not lose its worktrees to expiry."""
    now = timezone.now()
    AgentSession.objects.filter(pk=session.pk).update(last_heartbeat_at=now)
    Agent.objects.filter(pk=session.agent_id).update(last_heartbeat_at=now)
    agent_alive_hooks_run(agent=session.agent)
    session.last_heartbeat_at = now
    return session


def _require_open(session: AgentSession) -> None:
    if session.is_terminal:
        raise DomainError(f"Session {session.pk!r} is {session.status}; it takes no new records.", code="conflict")


def _allocate_seqs(*, session_pk: str, field: str, count: int) -> int:
    """Reserve ``count`` sequence numbers; returns the first. Caller must be in a transaction.

    The UPDATE locks the session row until commit, so concurrent writers to one session
    get disjoint, increasing ranges.
    """
    if field not in ("last_event_seq", "last_checkpoint_seq"):
        raise ValueError(field)
    table = connection.ops.quote_name(AgentSession._meta.db_table)
    column = connection.ops.quote_name(field)
    # One round trip: UPDATE ... RETURNING (PostgreSQL, and SQLite since 3.35).
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET {column} = {column} + %s WHERE id = %s RETURNING {column}",
            [count, session_pk],
        )
        row = cursor.fetchone()
    if row is None:
        raise DomainError(f"Session {session_pk!r} not found.", code="not_found")
    return row[0] - count + 1


def append_system_event(*, session: AgentSession, type: str, payload: dict) -> StreamEvent:
    seq = _allocate_seqs(session_pk=session.pk, field="last_event_seq", count=1)
    return StreamEvent.objects.create(session=session, seq=seq, type=type, payload=payload, timestamp=timezone.now())


def session_records_write(
    *,
    model,
    session: AgentSession,
    items: list[IncomingItem],
    create_rows: Callable[[list[IncomingItem]], list[Any]],
) -> list[ItemResult]:
    """Store the new items of a write in one transaction; replays answer with what was stored.

    A concurrent request that stores the same client id first makes our insert fail the
    unique constraint; the whole write is then retried and sees it as a replay.
    """
    for attempt in range(WRITE_RETRIES):
        try:
            with transaction.atomic():
                client_ids = [item.client_id for item in items if item.client_id is not None]
                existing = {}
                if client_ids:
                    existing = {
                        row.client_id: row for row in model.objects.filter(session=session, client_id__in=client_ids)
                    }
                fresh, results = resolve_replays(existing=existing, items=items)
                if fresh:
                    _require_open(session)
                created = create_rows(fresh) if fresh else []
        except IntegrityError:
            if attempt == WRITE_RETRIES - 1:
                raise
            continue
        by_index = {item.index: row for item, row in zip(fresh, created, strict=True)}
        results.extend(ItemResult(index=item.index, status=201, obj=by_index[item.index]) for item in fresh)
        for result in results:
            if isinstance(result.obj, tuple) and result.obj[0] == "same_as":
                result.obj = by_index[result.obj[1]]
        return sorted(results, key=lambda r: r.index)
    raise AssertionError("unreachable")


def stream_events_append(
    *, actor: Actor, session_id: str, items: list[IncomingItem], session: AgentSession | None = None
) -> list[ItemResult]:
    """Append valid events to the session, with increasing per-session seq numbers, in the order given.

    On PostgreSQL new events are first offered to one statement (sessions_app/event_sql.py): one
    event without a client id, or a batch. When it writes nothing (not PostgreSQL, not an agent,
    a session it does not take them for, a client id already stored) the general path looks the
    session up (404, 403) and writes through the ORM (stream_events_write: replays, 409). A caller
    that has looked the session up already passes it: the general path, without a second lookup.
    """
    if session is None:
        stored = _stream_events_one_statement(actor=actor, session_id=session_id, items=items)
        if stored is not None:
            return stored
        session = selectors.session_get_for_append(actor=actor, session_id=session_id)
    return stream_events_write(session=session, items=items)


def stream_events_write(*, session: AgentSession, items: list[IncomingItem]) -> list[ItemResult]:
    """The general path: append events in a transaction, replays answered by client id."""

    def create(fresh: list[IncomingItem]) -> list[StreamEvent]:
        first = _allocate_seqs(session_pk=session.pk, field="last_event_seq", count=len(fresh))
        now = timezone.now()
        rows = [
            StreamEvent(
                session=session,
                seq=first + offset,
                type=item.data["type"],
                payload=item.data.get("payload") or {},
                timestamp=item.data.get("timestamp") or now,
                client_id=item.client_id,
                body_sha256=item.body_sha256,
            )
            for offset, item in enumerate(fresh)
        ]
        created = StreamEvent.objects.bulk_create(rows)
        session_push(session_id=session.pk, seqs=(first, first + len(rows) - 1))
        return created

    return session_records_write(model=StreamEvent, session=session, items=items, create_rows=create)


def _stream_events_one_statement(
    *, actor: Actor, session_id: str, items: list[IncomingItem]
) -> list[ItemResult] | None:
    """The events stored by one of event_sql's statements, or None having written nothing."""
    db = transaction.get_connection()  # once: each use of the `connection` proxy looks it up again
    if db.vendor != "postgresql" or actor.agent is None or not items:
        return None
    if actor.bound_session_id not in (None, session_id):
        # A session-bound key on any other session (a child, or one it may not touch): the general
        # path decides, through the selectors' one rule (Actor.may_touch_session).
        return None
    if len(items) == 1 and items[0].client_id is None:
        return _stream_event_append_one(db, agent=actor.agent, session_id=session_id, item=items[0])
    client_ids = [item.client_id for item in items if item.client_id is not None]
    if len(set(client_ids)) != len(client_ids):
        return None  # the general path answers a repeated id with the first one's row
    return _stream_events_append_batch(db, agent=actor.agent, session_id=session_id, items=items)


def _stream_event_append_one(db, *, agent: Agent, session_id: str, item: IncomingItem) -> list[ItemResult] | None:
    now = timezone.now()
    payload = item.data.get("payload") or {}
    timestamp = item.data.get("timestamp") or now
    row = stream_event_insert_one(
        db,
        session_id=session_id,
        agent_id=agent.pk,
        type=item.data["type"],
        payload=payload,
        timestamp=timestamp,
        now=now,
        sha=item.body_sha256,
    )
    if row is None:
        return None
    event = StreamEvent(
        id=row[0],
        session_id=session_id,
        seq=row[1],
        type=item.data["type"],
        payload=payload,
        timestamp=timestamp,
        created_at=now,
        client_id=None,
        body_sha256=item.body_sha256,
    )
    event._state.adding = False
    session_push(session_id=session_id, seqs=(event.seq, event.seq))  # autocommit: already committed
    return [ItemResult(index=item.index, status=201, obj=event)]


class StoredEvent:
    """What a new event's answer shows, without a model instance (a batch of 1,000 spent a fifth
    of its time building them). ``stream_event_render`` reads the same attributes."""

    __slots__ = ("seq", "client_id", "type", "payload", "timestamp", "created_at")

    def __init__(self, *, seq, client_id, type, payload, timestamp, created_at):
        self.seq, self.client_id, self.type, self.payload = seq, client_id, type, payload
        self.timestamp, self.created_at = timestamp, created_at


def _stream_events_append_batch(
    db, *, agent: Agent, session_id: str, items: list[IncomingItem]
) -> list[ItemResult] | None:
    """A batch of new events, client ids distinct within it. A client id already stored makes the
    statement roll back whole: None, and the general path answers replays (200) and conflicts (409)."""
    now = timezone.now()
    payloads = [item.data.get("payload") or {} for item in items]
    timestamps = [item.data.get("timestamp") or now for item in items]
    try:
        with single_statement_atomic():
            row = stream_events_insert_batch(
                db,
                session_id=session_id,
                agent_id=agent.pk,
                types=[item.data["type"] for item in items],
                payloads=payloads,
                timestamps=timestamps,
                client_ids=[item.client_id for item in items],
                shas=[item.body_sha256 for item in items],
                now=now,
            )
    except IntegrityError:
        return None  # a client id already stored: a replay or a conflict
    if row is None:
        return None
    base, stored = row
    if stored != len(items):
        raise AssertionError(f"stored {stored} of {len(items)} events")
    session_push(session_id=session_id, seqs=(base + 1, base + len(items)))  # on commit when in a transaction
    return [
        ItemResult(
            index=item.index,
            status=201,
            obj=StoredEvent(
                seq=base + n,
                client_id=item.client_id,
                type=item.data["type"],
                payload=payload,
                timestamp=timestamp,
                created_at=now,
            ),
        )
        for n, (item, payload, timestamp) in enumerate(zip(items, payloads, timestamps, strict=True), start=1)
    ]


def checkpoint_save(*, session: AgentSession, item: IncomingItem) -> ItemResult:
    state = item.data["state"]
    size = len(json.dumps(state, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
    if size > settings.CHECKPOINT_MAX_BYTES:
        raise DomainError(
            f"Checkpoint state is {size} bytes; the limit is {settings.CHECKPOINT_MAX_BYTES}.", code="too_large"
        )

    def create(fresh: list[IncomingItem]) -> list[Checkpoint]:
        seq = _allocate_seqs(session_pk=session.pk, field="last_checkpoint_seq", count=1)
        return [
            Checkpoint.objects.create(
                session=session,
                seq=seq,
                state=state,
                size_bytes=size,
                client_id=item.client_id,
                body_sha256=item.body_sha256,
            )
        ]

    return session_records_write(model=Checkpoint, session=session, items=[item], create_rows=create)[0]


def milestone_record(*, actor: Actor, session: AgentSession, item: IncomingItem) -> ItemResult:
    text = item.data["text"]

    def create(fresh: list[IncomingItem]) -> list[Milestone]:
        milestone = Milestone.objects.create(
            session=session, text=text, client_id=item.client_id, body_sha256=item.body_sha256
        )
        event = append_system_event(
            session=session, type=StreamEvent.Type.MILESTONE, payload={"text": text, "milestone": milestone.pk}
        )
        session_push(session_id=session.pk, seqs=(event.seq, event.seq))
        return [milestone]

    return session_records_write(model=Milestone, session=session, items=[item], create_rows=create)[0]
