"""Reads shared by the API, the pages and the admin. Every request path goes through
a scoped lookup here, never an unscoped ``.objects.get``."""

from dataclasses import dataclass
from functools import cache

from django.db import connection
from django.db.models import Q, QuerySet
from django.utils import timezone

from board.models import Task
from config.actors import Actor
from config.api.errors import DomainError
from ledger.models import ToolInvocation
from sessions_app.models import Agent, AgentSession, Checkpoint, Milestone, StreamEvent
from workspaces.models import Worktree

RESUME_MILESTONES = 20


def session_get_for_actor(*, actor: Actor, session_id: str, for_update: bool = False) -> AgentSession:
    """The session, if it exists (404) and the actor may touch it (403)."""
    queryset = AgentSession.objects.select_related("agent", "workspace")
    if for_update:
        queryset = queryset.select_for_update()
    session = queryset.filter(pk=session_id).first()
    if session is None:
        raise DomainError(f"Session {session_id!r} not found.", code="not_found")
    _check_may_touch(actor, session)
    return session


def _check_may_touch(actor: Actor, session: AgentSession) -> None:
    if actor.may_touch_session(session):
        return
    if actor.owns(session.agent_id):
        raise DomainError(
            f"This key is bound to session {actor.bound_session_id!r}: it acts on that session and its "
            f"children only, not on {session.pk!r}.",
            code="forbidden",
        )
    raise DomainError(f"Session {session.pk!r} belongs to another agent.", code="forbidden")


# What appending to a session needs of it: who owns it, whether it still takes records, and its
# parent (a key bound to a session may also write to that session's children).
_APPEND_FIELDS = ("id", "agent_id", "status", "parent_id")


@cache
def _append_query(vendor: str) -> tuple[str, list[str]]:
    fields = [f for f in AgentSession._meta.concrete_fields if f.attname in _APPEND_FIELDS]  # model order
    quote = connection.ops.quote_name
    sql = (
        f"SELECT {', '.join(quote(f.column) for f in fields)} FROM {quote(AgentSession._meta.db_table)} "
        f"WHERE {quote(AgentSession._meta.pk.column)} = %s"
    )
    return sql, [f.attname for f in fields]


def session_get_for_append(*, actor: Actor, session_id: str) -> AgentSession:
    """``session_get_for_actor`` for endpoints that only append records to the session (events):
    the same 404 and 403, from one small query that loads the id, agent id and status (any other
    field loads when first read)."""
    sql, attnames = _append_query(connection.vendor)
    with connection.cursor() as cursor:
        cursor.execute(sql, [session_id])
        row = cursor.fetchone()
    if row is None:
        raise DomainError(f"Session {session_id!r} not found.", code="not_found")
    session = AgentSession.from_db(connection.alias, attnames, row)
    _check_may_touch(actor, session)
    return session


def session_list_for_actor(*, actor: Actor) -> QuerySet[AgentSession]:
    queryset = AgentSession.objects.select_related("agent", "workspace").order_by("-created_at", "id")
    if actor.is_staff:
        return queryset
    queryset = queryset.filter(agent=actor.agent)
    bound = actor.bound_session_id
    if bound is not None:
        queryset = queryset.filter(Q(pk=bound) | Q(parent_id=bound))
    return queryset


def agent_get_by_slug(*, slug: str) -> Agent:
    agent = Agent.objects.filter(slug=slug).first()
    if agent is None:
        raise DomainError(f"Agent {slug!r} not found.", code="not_found")
    return agent


def stream_events_after(*, session: AgentSession, after_seq: int, limit: int) -> tuple[list[StreamEvent], bool]:
    """Events with seq > after_seq, in order, and whether more follow."""
    rows = list(StreamEvent.objects.filter(session=session, seq__gt=after_seq).order_by("seq")[: limit + 1])
    return rows[:limit], len(rows) > limit


@dataclass
class ResumeState:
    session: AgentSession
    checkpoint: Checkpoint | None
    open_tool_calls: list[ToolInvocation]
    milestones: list[Milestone]
    claimed_tasks: list
    claimed_worktrees: list
    last_event_seq: int


def session_resume(*, session: AgentSession) -> ResumeState:
    """What a restarted agent picks up. Open tool calls include its subagents' (child sessions and
    theirs: a Claude Code subagent's calls are in a session of its own, see the hook). Worktree
    claims belong to the agent, not the session: the ones listed are those whose lease has not
    expired (a lapsed one may already be someone else's)."""
    checkpoint = Checkpoint.objects.filter(session=session).order_by("-seq").first()
    # One query: the session, its children and grandchildren (subagents don't nest deeper).
    tree = Q(session=session) | Q(session__parent=session) | Q(session__parent__parent=session)
    open_calls = list(
        ToolInvocation.objects.filter(tree, status=ToolInvocation.Status.RUNNING).order_by("started_at", "id")
    )
    milestones = list(Milestone.objects.filter(session=session).order_by("-created_at", "-id")[:RESUME_MILESTONES])
    milestones.reverse()
    claimed = list(
        Task.objects.filter(assignee_id=session.agent_id, status=Task.Status.IN_PROGRESS, session=session).order_by(
            "id"
        )
    )
    worktrees = list(
        Worktree.objects.filter(
            holder_id=session.agent_id, status=Worktree.Status.ACTIVE, lease_expires_at__gte=timezone.now()
        )
        .select_related("repository", "holder")
        .order_by("id")
    )
    return ResumeState(
        session=session,
        checkpoint=checkpoint,
        open_tool_calls=open_calls,
        milestones=milestones,
        claimed_tasks=claimed,
        claimed_worktrees=worktrees,
        last_event_seq=session.last_event_seq,
    )


def session_question(*, session: AgentSession) -> StreamEvent | None:
    """The newest ``input_request`` event that asks rather than answers, if nobody answered it yet:
    a session that waits again later (its turn ended) is not shown an old question as open."""
    questions = StreamEvent.objects.filter(session=session, type=StreamEvent.Type.INPUT_REQUEST)
    question = questions.exclude(payload__has_key="answer").order_by("-seq").first()
    if question is None or questions.filter(seq__gt=question.seq, payload__in_reply_to=question.seq).exists():
        return None
    return question
