from config.api.errors import DomainError
from ledger.models import ToolInvocation
from sessions_app.actors import Actor


def tool_call_get_for_actor(*, actor: Actor, tool_call_id: int) -> ToolInvocation:
    call = ToolInvocation.objects.select_related("session", "agent").filter(pk=tool_call_id).first()
    if call is None:
        raise DomainError(f"Tool call {tool_call_id} not found.", code="not_found")
    if not actor.owns(call.agent_id):
        raise DomainError(f"Tool call {tool_call_id} belongs to another agent.", code="forbidden")
    return call
