"""Claims on worktrees: a lease held by one agent, a FIFO queue of waiting agents, release, renewal.

A claim is a lease held by one agent. Every write to a worktree's claim state first locks
its row (``SELECT ... FOR UPDATE``; on SQLite the IMMEDIATE transaction already holds the
database's write lock), so claims, the FIFO queue and releases happen in one order; the
claim itself is a conditional UPDATE that only succeeds on a free or expired worktree.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from config.api.errors import DomainError
from sessions_app.actors import Actor
from sessions_app.models import Agent
from workspaces.models import Worktree, WorktreeClaimRequest
from workspaces.worktrees import check_may_change, event, holder_label, worktree_locked


@dataclass(frozen=True)
class ClaimResult:
    worktree: Worktree
    outcome: str  # "granted": the agent holds it now; "renewed": it already did; "queued": it waits
    position: int | None = None  # 1 = next in line


def _lease_end(now: datetime) -> datetime:
    return now + timedelta(seconds=settings.WORKTREE_LEASE_TTL_SECONDS)


def worktree_claim(*, actor: Actor, agent: Agent, worktree: Worktree, wait: bool = False) -> ClaimResult:
    """Claim the worktree for ``agent`` with a lease of WORKTREE_LEASE_TTL_SECONDS.

    The holder claiming again renews its lease. A worktree held by another agent is a 409
    naming the holder, or with ``wait`` a place in its FIFO queue. An expired lease goes to
    the first agent in the queue before any newcomer.
    """
    if actor.agent is None or actor.agent.pk != agent.pk:
        raise DomainError("Only agents claim worktrees, each for itself.", code="forbidden")
    if agent.status == Agent.Status.PAUSED:
        raise DomainError(f"Agent {agent.slug!r} is paused and takes no work.", code="conflict")
    refusal = None
    with transaction.atomic():
        row = worktree_locked(worktree.pk)
        if row.status != Worktree.Status.ACTIVE:
            raise DomainError(f"Worktree {row.pk} is {row.status}.", code="conflict")
        now = timezone.now()
        if row.holder_id == agent.pk and row.lease_expires_at >= now:
            Worktree.objects.filter(pk=row.pk).update(lease_expires_at=_lease_end(now), updated_at=now)
            result = ClaimResult(worktree=row, outcome="renewed")
        elif _queue_grant_if_free(actor=actor, worktree=row, now=now) and row.holder_id == agent.pk:
            result = ClaimResult(worktree=row, outcome="granted")  # it was first in the queue
        elif _take(actor=actor, agent=agent, worktree=row, now=now):
            result = ClaimResult(worktree=row, outcome="granted")
        elif wait:
            result = ClaimResult(worktree=row, outcome="queued", position=_enqueue(worktree=row, agent=agent))
        else:
            # Raised after the commit: a queued agent granted an expired lease above keeps it.
            refusal = DomainError(
                f"Worktree {row.pk} is held by {holder_label(row)} until {row.lease_expires_at.isoformat()}; "
                'claim with "wait": true to queue for it.',
                code="conflict",
                extra={
                    "holder": holder_label(row),
                    "lease_expires_at": row.lease_expires_at.isoformat(),
                    "waiting": row.queue.filter(status=WorktreeClaimRequest.Status.WAITING).count(),
                },
            )
    if refusal is not None:
        raise refusal
    result.worktree.refresh_from_db()
    return result


def _take(*, actor: Actor, agent: Agent, worktree: Worktree, now: datetime) -> bool:
    """The claim: one conditional UPDATE on a free or expired worktree. Caller holds the row lock."""
    previous = worktree.holder_id
    changed = (
        Worktree.objects.filter(pk=worktree.pk, status=Worktree.Status.ACTIVE)
        .filter(Q(holder__isnull=True) | Q(lease_expires_at__lt=now))
        .update(holder=agent, claimed_at=now, lease_expires_at=_lease_end(now), updated_at=now)
    )
    if changed != 1:
        return False
    if previous is not None:
        event("worktree.released", worktree, actor, holder=previous, reason="lease expired")
    worktree.holder_id = agent.pk
    event("worktree.claimed", worktree, actor, agent=agent.slug, holder=agent.pk, from_queue=False)
    return True


def _queue_head(worktree: Worktree) -> WorktreeClaimRequest | None:
    # By id: inserts into one worktree's queue are serialised by the row lock, so ids follow
    # arrival, and no clock skew between web servers can reorder them.
    waiting = worktree.queue.filter(status=WorktreeClaimRequest.Status.WAITING)
    return waiting.select_related("agent").order_by("id").first()


def _queue_grant_if_free(*, actor: Actor, worktree: Worktree, now: datetime) -> bool:
    """Give a free or expired worktree to the first waiting agent; True if one got it. Caller holds the row lock."""
    if worktree.holder_id is not None and worktree.lease_expires_at >= now:
        return False
    head = _queue_head(worktree)
    if head is None:
        return False
    if worktree.holder_id is not None:
        event("worktree.released", worktree, actor, holder=worktree.holder_id, reason="lease expired")
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
    worktree.holder_id = request.agent_id
    worktree.lease_expires_at = _lease_end(now)
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
    waiting = worktree.queue.filter(status=WorktreeClaimRequest.Status.WAITING)
    request = waiting.filter(agent=agent).first() or WorktreeClaimRequest.objects.create(worktree=worktree, agent=agent)
    return waiting.filter(id__lte=request.pk).count()


def worktree_release(*, actor: Actor, worktree: Worktree) -> Worktree:
    """Give the worktree up: to the first agent in its queue if there is one, else free.

    Only its holder with a lease that has not expired, or staff. A release after the lease
    expired is refused (409): another agent may have the worktree by then.
    """
    with transaction.atomic():
        row = worktree_locked(worktree.pk)
        if row.holder_id is None:
            raise DomainError(f"Worktree {row.pk} is not claimed; nothing to release.", code="conflict")
        now = timezone.now()
        check_may_change(actor=actor, worktree=row, now=now, verb="release")
        reason = "released" if actor.agent is not None else f"released by staff ({actor.label})"
        _release_to_queue(actor=actor, worktree=row, now=now, reason=reason)
    row.refresh_from_db()
    return row


def _release_to_queue(*, actor: Actor, worktree: Worktree, now: datetime, reason: str) -> None:
    """Free the worktree and hand it to the head of its queue, if any. Caller holds the row lock."""
    previous = worktree.holder_id
    Worktree.objects.filter(pk=worktree.pk, holder_id=previous).update(
        holder=None, lease_expires_at=None, released_at=now, updated_at=now
    )
    event("worktree.released", worktree, actor, holder=previous, reason=reason)
    worktree.holder_id = None
    head = _queue_head(worktree)
    if head is not None:
        _grant(actor=actor, worktree=worktree, request=head, now=now)


def worktree_leases_expire(*, actor: Actor, agent: Agent, reason: str) -> list[int]:
    """End the agent's leases now (it went stale): each worktree goes to the head of its queue, else
    free. Its own places in queues are cancelled, so a dead agent is never granted one later.

    Returns the ids of the worktrees it held. Locks each worktree row in id order; the caller's
    transaction, if any, keeps the locks until it commits.
    """
    expired = []
    now = timezone.now()
    held = Worktree.objects.filter(holder=agent).order_by("pk").values_list("pk", flat=True)
    with transaction.atomic():
        WorktreeClaimRequest.objects.filter(agent=agent, status=WorktreeClaimRequest.Status.WAITING).update(
            status=WorktreeClaimRequest.Status.CANCELLED, resolved_at=now
        )
        for worktree_id in held:
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
