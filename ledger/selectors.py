from config.actors import Actor
from config.api.errors import DomainError
from ledger.models import ToolInvocation
from sessions_app.models import AgentSession


def tool_call_get_for_actor(*, actor: Actor, tool_call_id: int) -> ToolInvocation:
    call = ToolInvocation.objects.select_related("session", "agent").filter(pk=tool_call_id).first()
    if call is None:
        raise DomainError(f"Tool call {tool_call_id} not found.", code="not_found")
    if not actor.owns(call.agent_id):
        raise DomainError(f"Tool call {tool_call_id} belongs to another agent.", code="forbidden")
    if not actor.may_touch_session(call.session):
        raise DomainError(
            f"Tool call {tool_call_id} is in session {call.session_id!r}, which this key (bound to session "
            f"{actor.bound_session_id!r}) may not act on.",
            code="forbidden",
        )
    return call


def tool_call_get_by_client_id(*, session: AgentSession, client_id: str) -> ToolInvocation:
    """The session's call with this client id (e.g. Claude Code's tool_use_id).

    The caller has already checked that the actor may see ``session``.
    """
    call = (
        ToolInvocation.objects.select_related("session", "agent").filter(session=session, client_id=client_id).first()
    )
    if call is None:
        raise DomainError(f"No tool call with client id {client_id!r} in session {session.pk!r}.", code="not_found")
    return call
