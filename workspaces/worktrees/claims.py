"""Claims on worktrees: a lease held by one agent, a FIFO queue of waiting agents, release, renewal.

A claim is a lease held by one agent. Every write to a worktree's claim state first locks
its row (``SELECT ... FOR UPDATE``; on SQLite the IMMEDIATE transaction already holds the
database's write lock), so claims, the FIFO queue and releases happen in one order; the
claim itself is a conditional UPDATE that only succeeds on a free or expired worktree with
nobody waiting for it.

These are the hottest writes of the API (32 agents over 8 worktrees answer about three
refusals per grant), so each path makes as few round trips as it can. Every claim and release
first reads the row without a lock or a transaction; a refusal is answered from that read. On
PostgreSQL, the common grant (a free worktree nobody waits for) and the common release (by its
holder, nobody waiting) are then one statement each, which applies only if the row is still the
version that was read (_change_unlocked). Anything else (a queue, an expired lease, a renewal,
staff, SQLite) is decided under the row lock. The answer is rendered from the row in memory
instead of being read again.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from config.actors import Actor
from config.api.errors import DomainError
from config.single_statement import single_statement_commits
from ledger.events import event_dispatch, event_fields, event_insert_sql
from sessions_app.models import Agent
from workspaces.models import Repository, Worktree, WorktreeClaimRequest
from workspaces.worktrees.services import (
    LEASE_EXPIRED,
    check_may_change,
    event,
    event_payload,
    holder_label,
    refuse_if_lease_lost,
    require_run_scope,
    worktree_locked,
)


@dataclass(frozen=True)
class ClaimResult:
    worktree: Worktree
    outcome: str  # "granted": the agent holds it now; "renewed": it already did; "queued": it waits
    position: int | None = None  # 1 = next in line


def _lease_end(now: datetime) -> datetime:
    return now + timedelta(seconds=settings.WORKTREE_LEASE_TTL_SECONDS)


def worktree_claim(*, actor: Actor, agent: Agent, worktree: Worktree | int, wait: bool = False) -> ClaimResult:
    """Claim the worktree (or the worktree with this id) for ``agent`` with a lease of
    WORKTREE_LEASE_TTL_SECONDS.

    The holder claiming again renews its lease. A worktree held by another agent is a 409
    naming the holder, or with ``wait`` a place in its FIFO queue. An expired lease goes to
    the first agent in the queue before any newcomer. The returned worktree carries its
    repository and holder, as they are after the claim.
    """
    if actor.agent is None or actor.agent.pk != agent.pk:
        raise DomainError("Only agents claim worktrees, each for itself.", code="forbidden")
    if agent.status == Agent.Status.PAUSED:
        raise DomainError(f"Agent {agent.slug!r} is paused and takes no work.", code="conflict")
    worktree_id = worktree if isinstance(worktree, int) else worktree.pk
    # Most claims under contention are refused: answer those from one committed read, without a
    # transaction or the row lock (a refusal changes nothing, and the read is a moment at which
    # the worktree was held). A free worktree with an empty queue is then taken in one statement.
    seen = _claim_row(worktree_id, lock=False)
    require_run_scope(actor=actor, worktree=seen)
    now = timezone.now()
    if not wait and _held_by_other(seen, agent=agent, now=now):
        raise _refusal(seen, waiting=seen.waiting)
    if seen.holder_id is None and not seen.waiting:
        taken = _change_unlocked(
            seen,
            set_sql="holder_id = %s, claimed_at = %s, lease_expires_at = %s, updated_at = %s",
            set_params=[agent.pk, now, _lease_end(now), now],
            event_name="worktree.claimed",
            payload={"agent": agent.slug, "holder": agent.pk, "from_queue": False},
            actor=actor,
        )
        if taken:
            _held_in_memory(seen, agent=agent, now=now)
            return ClaimResult(worktree=seen, outcome="granted")
    # Anything else is decided under the lock.
    refusal = None
    with transaction.atomic():
        row = _claim_row(worktree_id, lock=True)
        now = timezone.now()
        if row.holder_id == agent.pk and row.lease_expires_at >= now:
            Worktree.objects.filter(pk=row.pk).update(lease_expires_at=_lease_end(now), updated_at=now)
            row.lease_expires_at, row.updated_at = _lease_end(now), now
            result = ClaimResult(worktree=row, outcome="renewed")
        elif _take(actor=actor, agent=agent, worktree=row, now=now):
            result = ClaimResult(worktree=row, outcome="granted")
        elif _queue_grant_if_free(actor=actor, worktree=row, now=now) and row.holder_id == agent.pk:
            result = ClaimResult(worktree=row, outcome="granted")  # it was first in the queue
        elif wait:
            result = ClaimResult(worktree=row, outcome="queued", position=_enqueue(worktree=row, agent=agent))
        else:
            # Raised after the commit: a queued agent granted an expired lease above keeps it.
            refusal = _refusal(row, waiting=_waiting(row).count())
    if refusal is not None:
        raise refusal
    return result


def _held_in_memory(worktree: Worktree, *, agent: Agent, now: datetime) -> None:
    """The row in memory as a grant to ``agent`` at ``now`` left it in the database."""
    worktree.holder = agent
    worktree.claimed_at, worktree.lease_expires_at, worktree.updated_at = now, _lease_end(now), now


def _freed_in_memory(worktree: Worktree, *, now: datetime) -> None:
    """The row in memory as a release at ``now`` left it in the database."""
    worktree.holder = None
    worktree.lease_expires_at, worktree.released_at, worktree.updated_at = None, now, now


def _claim_row(worktree_id: int, *, lock: bool, active: bool = True) -> Worktree:
    """The worktree with its repository, holder, ``waiting`` (its queue's length) and, on PostgreSQL,
    ``row_version`` (for _change_unlocked); 404 if missing; with ``active``, 409 unless it is active.

    With ``lock`` the row is locked until the caller's transaction ends. ``waiting`` is then as of
    the statement's start, which may be before the lock was granted: decide nothing on it.
    """
    # Written out once and read with a plain cursor: compiling the equivalent select_related +
    # subquery cost about 1 ms of CPU, ten times its execution, and Model.objects.raw() still
    # doubled the cost of the read.
    db = transaction.get_connection()  # once: each use of the `connection` proxy looks it up again
    sql = _CLAIM_ROW_SQL.format(version="w.xmin::text" if db.vendor == "postgresql" else "NULL")
    if lock and db.features.has_select_for_update_of:
        sql += " FOR UPDATE OF w"
    with db.cursor() as cursor:
        cursor.execute(sql, [worktree_id])
        found = cursor.fetchone()
    if found is None:
        raise DomainError(f"Worktree {worktree_id} not found.", code="not_found")
    values = list(found[: len(_ROW_FIELDS)])
    for index, (field, column) in enumerate(_ROW_FIELDS):  # as a queryset would (SQLite's datetimes are text)
        for convert in db.ops.get_db_converters(column) + field.get_db_converters(db):
            values[index] = convert(values[index], column, db)
    row = Worktree.from_db(db.alias, _ROW_ATTNAMES, values)
    row.repository_name, row.holder_slug, row.row_version, row.waiting = found[len(_ROW_FIELDS) :]
    if active and row.status != Worktree.Status.ACTIVE:
        raise DomainError(f"Worktree {row.pk} is {row.status}.", code="conflict")
    # Only the fields the API shows are loaded; any other is read on first use.
    row.repository = Repository.from_db(row._state.db, ["id", "name"], [row.repository_id, row.repository_name])
    if row.holder_id is None:
        row.holder = None
    elif row.holder_slug is not None:
        row.holder = Agent.from_db(row._state.db, ["id", "slug"], [row.holder_id, row.holder_slug])
    # else: the lock was granted after another transaction changed the holder. PostgreSQL then
    # returns the row as it is now, but joins it to the agent it found at the statement's start:
    # none. The holder is left to be read when it is needed.
    return row


_ROW_FIELDS = [(field, field.get_col(Worktree._meta.db_table)) for field in Worktree._meta.concrete_fields]
_ROW_ATTNAMES = [field.attname for field, _ in _ROW_FIELDS]
_CLAIM_ROW_SQL = f"""
SELECT {", ".join(f"w.{column.target.column}" for _, column in _ROW_FIELDS)}, r.name AS repository_name, a.slug AS holder_slug, {{version}} AS row_version,
       (SELECT COUNT(*) FROM {WorktreeClaimRequest._meta.db_table} q
         WHERE q.worktree_id = w.id AND q.status = '{WorktreeClaimRequest.Status.WAITING}') AS waiting
  FROM {Worktree._meta.db_table} w
  JOIN {Repository._meta.db_table} r ON r.id = w.repository_id
  LEFT JOIN {Agent._meta.db_table} a ON a.id = w.holder_id
 WHERE w.id = %s"""


def _held_by_other(row: Worktree, *, agent: Agent, now: datetime) -> bool:
    return row.holder_id is not None and row.holder_id != agent.pk and row.lease_expires_at >= now


def _refusal(row: Worktree, *, waiting: int) -> DomainError:
    holder = holder_label(row)
    return DomainError(
        f"Worktree {row.pk} is held by {holder} until {row.lease_expires_at.isoformat()}; "
        'claim with "wait": true to queue for it.',
        code="conflict",
        extra={"holder": holder, "lease_expires_at": row.lease_expires_at.isoformat(), "waiting": waiting},
    )


def _waiting(worktree: Worktree):
    return WorktreeClaimRequest.objects.filter(worktree_id=worktree.pk, status=WorktreeClaimRequest.Status.WAITING)


def _change_unlocked(
    worktree: Worktree, *, set_sql: str, set_params: list, event_name: str, payload: dict, actor: Actor
) -> bool:
    """Apply ``set_sql`` to the worktree and record the event, in one statement that commits by
    itself, but only if the row is still the version ``worktree`` was read as (PostgreSQL's xmin
    names the transaction that wrote a row version). True if it was applied.

    The caller decided from that read, without a lock, that the change is allowed (a free
    worktree, or its holder releasing) and that nobody waits. The version makes that decision
    hold at the moment of the change: a claim, release or expiry since the read wrote a new
    version, and so does a place taken in the queue (_enqueue touches the row for this reason,
    since the statement cannot see requests committed after it started). Then nothing is changed
    and the caller decides again under the row lock. Only where a statement commits by itself
    (PostgreSQL, autocommit): elsewhere this returns False at once.
    """
    if worktree.row_version is None or not single_statement_commits():
        return False
    db = transaction.get_connection()
    stamp = db.ops.adapt_datetimefield_value
    params = [stamp(v) if isinstance(v, datetime) else v for v in set_params]
    # The event is what event() records, its insert the ledger's own.
    fields = event_fields(
        name=event_name,
        subject_type="worktree",
        subject_id=worktree.pk,
        actor=actor.label,
        payload=event_payload(worktree, **payload),
    )
    with db.cursor() as cursor:
        cursor.execute(
            _CHANGE_UNLOCKED_SQL.format(set=set_sql) + _EVENT_INSERT.sql,
            [*params, worktree.pk, worktree.row_version, *_EVENT_INSERT.params(db, fields)],
        )
        changed = cursor.fetchone()
    if changed is None:
        return False
    event_dispatch(event_id=changed[0])
    return True


_CHANGE_UNLOCKED_SQL = f"""
WITH changed AS (
  UPDATE {Worktree._meta.db_table} SET {{set}} WHERE id = %s AND xmin = %s::xid RETURNING id
)
"""
_EVENT_INSERT = event_insert_sql(source="changed")  # one event if the UPDATE changed the row


def _take(*, actor: Actor, agent: Agent, worktree: Worktree, now: datetime) -> bool:
    """The claim: one conditional UPDATE on a free or expired worktree that nobody waits for (the
    queue goes first). Caller holds the row lock, so the UPDATE's own read of the queue is current."""
    if worktree.holder_id is not None and worktree.lease_expires_at >= now:
        return False
    previous = worktree.holder_id
    stamp = connection.ops.adapt_datetimefield_value
    with connection.cursor() as cursor:
        cursor.execute(_TAKE_SQL, [agent.pk, stamp(now), stamp(_lease_end(now)), stamp(now), worktree.pk, stamp(now)])
        changed = cursor.rowcount
    if changed != 1:
        return False
    if previous is not None:
        event("worktree.released", worktree, actor, holder=previous, reason=LEASE_EXPIRED)
    _held_in_memory(worktree, agent=agent, now=now)
    event("worktree.claimed", worktree, actor, agent=agent.slug, holder=agent.pk, from_queue=False)
    return True


# The ORM's conditional update (with the queue's NOT EXISTS) cost more to compile than to run.
_TAKE_SQL = f"""
UPDATE {Worktree._meta.db_table}
   SET holder_id = %s, claimed_at = %s, lease_expires_at = %s, updated_at = %s
 WHERE id = %s AND status = '{Worktree.Status.ACTIVE}' AND (holder_id IS NULL OR lease_expires_at < %s)
   AND NOT EXISTS (SELECT 1 FROM {WorktreeClaimRequest._meta.db_table} q
                    WHERE q.worktree_id = {Worktree._meta.db_table}.id AND q.status = '{WorktreeClaimRequest.Status.WAITING}')"""


def _queue_head(worktree: Worktree) -> WorktreeClaimRequest | None:
    # By id: inserts into one worktree's queue are serialised by the row lock, so ids follow
    # arrival, and no clock skew between web servers can reorder them. Asked on every release.
    head = next(iter(WorktreeClaimRequest.objects.raw(_QUEUE_HEAD_SQL, [worktree.pk])), None)
    if head is not None:
        head.agent = Agent.from_db(head._state.db, ["id", "slug"], [head.agent_id, head.agent_slug])
    return head


_QUEUE_HEAD_SQL = f"""
SELECT q.*, a.slug AS agent_slug
  FROM {WorktreeClaimRequest._meta.db_table} q JOIN {Agent._meta.db_table} a ON a.id = q.agent_id
 WHERE q.worktree_id = %s AND q.status = '{WorktreeClaimRequest.Status.WAITING}'
 ORDER BY q.id LIMIT 1"""


def _queue_grant_if_free(*, actor: Actor, worktree: Worktree, now: datetime) -> bool:
    """Give a free or expired worktree to the first waiting agent; True if one got it. Caller holds the row lock."""
    if worktree.holder_id is not None and worktree.lease_expires_at >= now:
        return False
    head = _queue_head(worktree)
    if head is None:
        return False
    if worktree.holder_id is not None:
        event("worktree.released", worktree, actor, holder=worktree.holder_id, reason=LEASE_EXPIRED)
    _grant(actor=actor, worktree=worktree, request=head, now=now)
    return True


def _grant(*, actor: Actor, worktree: Worktree, request: WorktreeClaimRequest, now: datetime) -> None:
    """Hand the worktree to a waiting request. Caller holds the row lock."""
    changed = Worktree.objects.filter(pk=worktree.pk, holder_id=worktree.holder_id).update(
        holder_id=request.agent_id, claimed_at=now, lease_expires_at=_lease_end(now), updated_at=now
    )
    if changed != 1:
        raise RuntimeError(f"worktree {worktree.pk} changed holder under its row lock")
    WorktreeClaimRequest.objects.filter(pk=request.pk).update(
        status=WorktreeClaimRequest.Status.GRANTED, resolved_at=now
    )
    _held_in_memory(worktree, agent=request.agent, now=now)
    event(
        "worktree.claimed",
        worktree,
        actor,
        agent=request.agent.slug,
        holder=request.agent_id,
        from_queue=True,
        request=request.pk,
    )


def _enqueue(*, worktree: Worktree, agent: Agent) -> int:
    """The agent's place in the queue (1 = next), joining it if it is not waiting yet. Caller holds the row lock."""
    waiting = _waiting(worktree)
    request = waiting.filter(agent=agent).first()
    if request is None:
        request = WorktreeClaimRequest.objects.create(worktree=worktree, agent=agent)
        # A new row version: a release read before this commits must not free the worktree in
        # one statement past the new place in the queue (_change_unlocked).
        Worktree.objects.filter(pk=worktree.pk).update(updated_at=timezone.now())
    return waiting.filter(id__lte=request.pk).count()


def worktree_release(*, actor: Actor, worktree: Worktree | int) -> Worktree:
    """Give the worktree (or the worktree with this id) up: to the first agent in its queue if
    there is one, else free. Returns it with its repository and holder, as they are after.

    Only its holder with a lease that has not expired, or staff. A release after the lease
    expired is refused (409): another agent may have the worktree by then.
    """
    worktree_id = worktree if isinstance(worktree, int) else worktree.pk
    seen = _claim_row(worktree_id, lock=False, active=False)
    require_run_scope(actor=actor, worktree=seen)
    now = timezone.now()
    # The holder releasing with nobody waiting: one statement. Staff, a queue, an expired lease
    # or someone else's release are decided (or refused) under the lock.
    holder = actor.agent.pk if actor.agent is not None else None
    if holder is not None and seen.holder_id == holder and seen.lease_expires_at >= now and not seen.waiting:
        freed = _change_unlocked(
            seen,
            set_sql="holder_id = NULL, lease_expires_at = NULL, released_at = %s, updated_at = %s",
            set_params=[now, now],
            event_name="worktree.released",
            payload={"holder": holder, "reason": "released"},
            actor=actor,
        )
        if freed:
            _freed_in_memory(seen, now=now)
            return seen
    with transaction.atomic():
        row = _claim_row(worktree_id, lock=True, active=False)
        if row.holder_id is None:
            refuse_if_lease_lost(actor=actor, worktree=row)
            raise DomainError(f"Worktree {row.pk} is not claimed; nothing to release.", code="conflict")
        now = timezone.now()
        check_may_change(actor=actor, worktree=row, now=now, verb="release")
        reason = "released" if actor.agent is not None else f"released by staff ({actor.label})"
        _release_to_queue(actor=actor, worktree=row, now=now, reason=reason)
    return row


def _release_to_queue(*, actor: Actor, worktree: Worktree, now: datetime, reason: str) -> None:
    """Free the worktree and hand it to the head of its queue, if any. Caller holds the row lock."""
    previous = worktree.holder_id
    Worktree.objects.filter(pk=worktree.pk, holder_id=previous).update(
        holder=None, lease_expires_at=None, released_at=now, updated_at=now
    )
    event("worktree.released", worktree, actor, holder=previous, reason=reason)
    _freed_in_memory(worktree, now=now)
    head = _queue_head(worktree)
    if head is not None:
        _grant(actor=actor, worktree=worktree, request=head, now=now)


def worktree_leases_expire(*, actor: Actor, agent: Agent, reason: str) -> list[int]:
    """End the agent's leases now (it went stale): each worktree goes to the head of its queue, else
    free. Its own places in queues are cancelled, so a dead agent is never granted one later.

    Returns the ids of the worktrees it held. Locks each worktree row in id order; the caller's
    transaction, if any, keeps the locks until it commits.
    """
    return _claims_end(actor=actor, agent=agent, worktrees=None, reason=reason)


def worktree_claims_end(*, actor: Actor, agent: Agent, worktrees, reason: str) -> list[int]:
    """End the agent's claims on ``worktrees`` (a queryset) now, as worktree_leases_expire does for all
    of them: a run that held them ended (runners/run_lifecycle.py), so the next attempt, on any
    runner, can claim them at once. Returns the ids of the worktrees it held there."""
    return _claims_end(actor=actor, agent=agent, worktrees=worktrees, reason=reason)


def _claims_end(*, actor: Actor, agent: Agent, worktrees, reason: str) -> list[int]:
    """The agent's claims on ``worktrees`` (None: on any) and its places in their queues, ended."""
    expired = []
    now = timezone.now()
    held = (Worktree.objects.all() if worktrees is None else worktrees).filter(holder=agent)
    waiting = WorktreeClaimRequest.objects.filter(agent=agent, status=WorktreeClaimRequest.Status.WAITING)
    if worktrees is not None:
        waiting = waiting.filter(worktree__in=worktrees)
    with transaction.atomic():
        waiting.update(status=WorktreeClaimRequest.Status.CANCELLED, resolved_at=now)
        for worktree_id in held.order_by("pk").values_list("pk", flat=True):
            row = worktree_locked(worktree_id)
            if row.holder_id != agent.pk:
                continue  # released or re-granted since we looked
            _release_to_queue(actor=actor, worktree=row, now=now, reason=reason)
            expired.append(row.pk)
    return expired


def worktree_leases_renew(*, agent: Agent) -> int:
    """Extend every lease the agent still validly holds (its heartbeat); an expired one stays expired."""
    now = timezone.now()
    return Worktree.objects.filter(holder=agent, status=Worktree.Status.ACTIVE, lease_expires_at__gte=now).update(
        lease_expires_at=_lease_end(now), updated_at=now
    )
