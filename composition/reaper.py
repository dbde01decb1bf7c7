"""The heartbeat reaper: agents that went silent give their work back.

An active agent whose last heartbeat is older than HEARTBEAT_TTL_SECONDS is marked ``error``
(any authenticated request of the agent counts as a heartbeat: sessions_app/liveness.py),
an ``agent.stale`` event is recorded, its claimed tasks go back to ``ready`` (their claims
end as ``expired``) and its worktree leases go to the head of each worktree's queue. An agent
never heard from (no heartbeat, no request) has promised none and is left alone; a paused, completed or
already errored agent is not active and is left alone too. Its next heartbeat makes it active
again (sessions_app.services.agent_heartbeat); the work it lost stays with whoever took it.

In the top layer because taking an agent's work back spans the apps: its row (sessions_app), its
tasks (board), its worktrees (workspaces) and the event (ledger).
"""

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from board.models import Task, TaskClaim
from board.services import task_release
from config.actors import SYSTEM
from ledger.events import event_record
from sessions_app.models import Agent
from workspaces.worktrees.claims import worktree_leases_expire

logger = logging.getLogger(__name__)
BATCH_SIZE = 100


@dataclass(frozen=True)
class Reaped:
    agent_id: int
    slug: str
    tasks: list[int]
    worktrees: list[int]


def agents_reap_stale(*, now: datetime | None = None, batch_size: int = BATCH_SIZE) -> list[Reaped]:
    """Reap up to ``batch_size`` stale agents, oldest heartbeat first; each in its own transaction.

    Safe to run twice or in two workers at once: each agent is claimed with a conditional
    UPDATE, so exactly one reaper marks it and records its event.
    """
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.HEARTBEAT_TTL_SECONDS)
    stale = Agent.objects.filter(status=Agent.Status.ACTIVE, last_heartbeat_at__lt=cutoff)
    reaped = []
    for agent_id in stale.order_by("last_heartbeat_at", "pk").values_list("pk", flat=True)[:batch_size]:
        try:
            result = agent_reap(agent_id=agent_id, cutoff=cutoff, now=now)
        except Exception:
            # One agent whose work cannot be returned must not keep the others stale; it is
            # still active, so the next run tries it again.
            logger.exception("reaping agent %s failed", agent_id)
            continue
        if result is not None:
            reaped.append(result)
    return reaped


@transaction.atomic
def agent_reap(*, agent_id: int, cutoff: datetime, now: datetime) -> Reaped | None:
    """Mark one agent stale and take its work back; None if it is not (or no longer) stale.

    The conditional UPDATE takes the agent's row lock first: a heartbeat that lands meanwhile
    waits for this transaction, and a second reaper finds the agent in ``error`` and does nothing.
    """
    changed = Agent.objects.filter(pk=agent_id, status=Agent.Status.ACTIVE, last_heartbeat_at__lt=cutoff).update(
        status=Agent.Status.ERROR, updated_at=now
    )
    if changed != 1:
        return None
    agent = Agent.objects.get(pk=agent_id)
    tasks = _tasks_expire(agent=agent)
    worktrees = worktree_leases_expire(actor=SYSTEM, agent=agent, reason=f"holder {agent.slug} stale")
    event_record(
        name="agent.stale",
        subject_type="agent",
        subject_id=agent.slug,
        actor=SYSTEM.label,
        payload={
            "last_heartbeat_at": agent.last_heartbeat_at.isoformat(),
            "ttl_seconds": settings.HEARTBEAT_TTL_SECONDS,
            "tasks_returned": tasks,
            "worktrees_returned": worktrees,
        },
    )
    return Reaped(agent_id=agent.pk, slug=agent.slug, tasks=tasks, worktrees=worktrees)


def _tasks_expire(*, agent: Agent) -> list[int]:
    """Every task the agent holds back to ready; its claim ends as ``expired``. Caller holds a transaction."""
    returned = []
    # Locked in id order for the rest of the transaction: between our look and the release, the
    # task can't be given back and claimed by someone else, whose claim we would then end.
    held = Task.objects.select_for_update().filter(assignee=agent, status=Task.Status.IN_PROGRESS)
    for task in held.order_by("pk"):
        claim_id = TaskClaim.objects.filter(task=task, released_at__isnull=True).values_list("pk", flat=True).first()
        task, changed = task_release(actor=SYSTEM, task=task)
        if not changed:
            continue
        # task_release ends a claim as "released" (given back by its holder); this one was taken
        # back. task_release locked the task row, and our transaction holds that lock until commit.
        TaskClaim.objects.filter(pk=claim_id).update(outcome=TaskClaim.Outcome.EXPIRED)
        returned.append(task.pk)
    return returned
