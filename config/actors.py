"""Who is acting: an agent (by key) or a person (by browser session).

In the kernel because every app asks it (sessions, claims, files, runs). It knows an agent and a
key only by the few attributes below, so the kernel imports no app: ``sessions_app.models``
supplies ``Agent`` and ``AgentApiKey``, and takes its orchestrate scope's value from here.
"""

from dataclasses import dataclass
from typing import Protocol

# The value of AgentApiKey.Scope.ORCHESTRATE (which is defined from this constant).
ORCHESTRATE_SCOPE = "orchestrate"


class ActingAgent(Protocol):
    """What an Actor reads of a sessions_app Agent."""

    pk: int
    slug: str


@dataclass(frozen=True)
class BoundWork:
    """What a key bound to a run's session reaches besides that session (SPEC §8, "a run acts only
    for itself"): the session's task, and that task's worktree, the one the runner makes for it
    (``<type>-<task id>`` of the task's repository). None where the session has no task."""

    task_id: int | None = None
    repository_id: int | None = None


class ActingKey(Protocol):
    """What an Actor reads of a sessions_app AgentApiKey."""

    session_id: str | None

    def has_scope(self, scope: str) -> bool: ...

    def bound_work(self) -> BoundWork:
        """Asked only of a key bound to a session (``session_id`` set)."""
        ...


@dataclass(frozen=True)
class Actor:
    agent: ActingAgent | None = None
    api_key: ActingKey | None = None
    user: object | None = None  # a django.contrib.auth user
    # Background work (the heartbeat reaper, imports) acting for Switchyard itself: it may end
    # any agent's claims. Never set from a request: only the SYSTEM constant below has it.
    system: bool = False

    @property
    def is_staff(self) -> bool:
        return self.agent is None and bool(getattr(self.user, "is_staff", False))

    @property
    def can_orchestrate(self) -> bool:
        return self.is_staff or (self.api_key is not None and self.api_key.has_scope(ORCHESTRATE_SCOPE))

    @property
    def label(self) -> str:
        if self.agent is not None:
            return f"agent:{self.agent.slug}"
        if self.user is not None:
            return f"user:{self.user.get_username()}"
        return "system"

    def owns(self, agent_id: int | None) -> bool:
        """May this actor act for the agent with this id? Staff and the system may act for any."""
        return self.system or self.is_staff or (self.agent is not None and self.agent.pk == agent_id)

    @property
    def bound_session_id(self) -> str | None:
        """The session a per-run key is bound to (SPEC §8), or None: any of its agent's sessions."""
        return self.api_key.session_id if self.api_key is not None else None

    def may_touch_session(self, session) -> bool:
        """May this actor act on this session? Its agent's sessions (``owns``); for a key bound to a
        session, only that session and its children. Every lookup of a session named in a request
        asks this, so a new endpoint inherits the rule by using the selectors."""
        if not self.owns(session.agent_id):
            return False
        bound = self.bound_session_id
        return bound is None or session.pk == bound or session.parent_id == bound

    # --- a run acts only for itself (SPEC §8) ------------------------------------------------------
    # All runs of one provider on one runner share one agent row (``claude@build-1``), so "it holds
    # the claim" cannot tell run A from run B. The key can: a per-run key is bound to its run's
    # session, and reaches that session's task and that task's worktree, nothing else of the board
    # or the worktrees. The board's and the worktrees' services ask these (through config/run_scope.py,
    # which words the 403), before anything is read for update or written; a key that is not bound
    # passes at no cost.

    @property
    def bound_work(self) -> BoundWork | None:
        """What a per-run key reaches besides its session; None for any other actor (no limit)."""
        return self.api_key.bound_work() if self.bound_session_id is not None else None

    def may_touch_task(self, task_id: int) -> bool:
        work = self.bound_work
        return work is None or (work.task_id is not None and work.task_id == task_id)

    def may_touch_worktree(self, *, repository_id: int, name: str) -> bool:
        work = self.bound_work
        if work is None:
            return True
        return work.task_id is not None and repository_id == work.repository_id and name == str(work.task_id)


SYSTEM = Actor(system=True)
