"""Signs of life: an explicit heartbeat and, just as well, any authenticated request of an agent.

Agents that post events and tool calls every few seconds but never call the heartbeat endpoint
are working, and the reaper (composition/reaper.py) must not take their tasks and worktrees
back. So the key authentication (sessions_app/keys.py) counts each request as a heartbeat, with
the same effects as one: ``last_heartbeat_at`` moves to now, an agent the reaper marked
``error`` (or one that had ``completed``) is ``active`` again, and the worktree leases it still
holds are renewed. ``last_heartbeat_at`` is thus the agent's last activity, whatever its kind.

Cheap on purpose: a request writes only when the agent's last sign of life is older than
ACTIVITY_RESOLUTION_SECONDS, and the key cache remembers the write, so a busy agent costs one
conditional UPDATE (and one lease renewal) per few seconds, not one per request.
"""

from datetime import datetime, timedelta

from django.db.models import Case, F, Q, Value, When

from sessions_app.models import Agent
from sessions_app.session_hooks import agent_alive_hooks_run

# Far below HEARTBEAT_TTL_SECONDS (300 s) and WORKTREE_LEASE_TTL_SECONDS (900 s): a request
# always keeps an agent's work, while a busy agent writes at most once per this many seconds.
ACTIVITY_RESOLUTION_SECONDS = 5

# A heartbeat brings a stale (or finished) agent back; a paused one stays paused.
_REVIVED = (Agent.Status.ERROR, Agent.Status.COMPLETED)


def agent_alive(*, agent: Agent, now: datetime, only_if_older: bool = False) -> bool:
    """Record a sign of life of ``agent`` at ``now``; True if this call wrote it.

    ``only_if_older``: write only when the stored one is older than ACTIVITY_RESOLUTION_SECONDS
    (a request's implicit heartbeat); an explicit heartbeat always writes. One UPDATE sets the
    time and the status together; it waits for a reaper holding the agent's row, so the agent is
    either reaped first and revived by this, or not reaped at all.
    """
    rows = Agent.objects.filter(pk=agent.pk)
    if only_if_older:
        cutoff = now - timedelta(seconds=ACTIVITY_RESOLUTION_SECONDS)
        rows = rows.filter(Q(last_heartbeat_at__isnull=True) | Q(last_heartbeat_at__lt=cutoff))
    changed = rows.update(
        last_heartbeat_at=now,
        status=Case(When(status__in=_REVIVED, then=Value(Agent.Status.ACTIVE)), default=F("status")),
    )
    if not changed:
        return False
    # What the agent holds elsewhere (its worktree leases) is renewed by every sign of life: an
    # agent the reaper counts as alive must not lose it to expiry while it works.
    agent_alive_hooks_run(agent=agent)
    agent.last_heartbeat_at = now
    if agent.status in _REVIVED:
        agent.status = Agent.Status.ACTIVE
    return True


def agent_activity_record(*, agent: Agent, now: datetime) -> bool:
    """A request of ``agent`` at ``now`` counts as its heartbeat; True if it wrote.

    ``agent`` is the key cache's own copy (sessions_app/keys.py): updated here, it tells the next
    requests of the cache window that nothing needs writing. No query at all when the agent's
    last sign of life, as the cache knows it, is recent.
    """
    seen = agent.last_heartbeat_at
    if seen is not None and (now - seen).total_seconds() < ACTIVITY_RESOLUTION_SECONDS:
        return False
    wrote = agent_alive(agent=agent, now=now, only_if_older=True)
    # Written by this call or, within the resolution, by another process: either way recent.
    agent.last_heartbeat_at = max(now, seen) if seen is not None else now
    return wrote
