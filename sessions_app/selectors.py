"""Reads shared by the API, the pages and the admin. Every request path goes through
a scoped lookup here, never an unscoped ``.objects.get``."""

from functools import cache

from django.db import connection
from django.db.models import Q, QuerySet

from config.actors import Actor
from config.api.errors import DomainError
from sessions_app.models import Agent, AgentSession, StreamEvent
from sessions_app.session_hooks import session_read_granted


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


def session_get_for_reader(*, actor: Actor, session_id: str) -> AgentSession:
    """``session_get_for_actor`` for reads only: also a session another app's read grant opens to the
    actor (sessions_app/session_hooks.py: an ``orchestrate`` key reads the sessions of runs)."""
    session = AgentSession.objects.select_related("agent", "workspace").filter(pk=session_id).first()
    if session is None:
        raise DomainError(f"Session {session_id!r} not found.", code="not_found")
    if not actor.may_touch_session(session) and session_read_granted(actor=actor, session=session):
        return session
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


def session_question(*, session: AgentSession) -> StreamEvent | None:
    """The newest ``input_request`` event that asks rather than answers, if nobody answered it yet:
    a session that waits again later (its turn ended) is not shown an old question as open."""
    questions = StreamEvent.objects.filter(session=session, type=StreamEvent.Type.INPUT_REQUEST)
    question = questions.exclude(payload__has_key="answer").order_by("-seq").first()
    if question is None or questions.filter(seq__gt=question.seq, payload__in_reply_to=question.seq).exists():
        return None
    return question
