"""Tool spans of OpenTelemetry GenAI instrumentation, recorded in the session's tool-call ledger.

An agent framework that is not Claude Code reports its tool calls only as ``execute_tool`` spans
(no hook runs for it), so each such span that names a session the key may write becomes a finished
``ToolInvocation``, as a hook's PostToolUse would have made it: the session page, resume and the
agent's metrics then see them. The span's identity is the call's client id, so an exporter's retry
records nothing twice.
"""

from collections import defaultdict

from config.api.errors import DomainError
from config.idempotency import IncomingItem, canonical_sha256
from ledger.models import ToolInvocation
from ledger.services import tool_calls_record
from sessions_app.models import AgentSession
from usage.extract import UsageItem

CLIENT_ID_PREFIX = "otel-span:"


def tool_spans_record(*, spans: list[tuple[AgentSession, UsageItem]]) -> int:
    """Record the tool spans of open sessions as finished calls; answers how many were new."""
    by_session: dict[str, list[UsageItem]] = defaultdict(list)
    sessions: dict[str, AgentSession] = {}
    for session, item in spans:
        by_session[session.pk].append(item)
        sessions[session.pk] = session
    created = 0
    for session_id, items in by_session.items():
        incoming = [_incoming(index, item) for index, item in enumerate(items)]
        try:
            results = tool_calls_record(session=sessions[session_id], items=incoming)
        except DomainError:
            # A closed session's ledger takes no new calls; its usage rows are stored all the same.
            continue
        created += sum(1 for result in results if result.status == 201)
    return created


def _incoming(index: int, item: UsageItem) -> IncomingItem:
    data = {
        "tool_name": item.tool_name,
        "status": ToolInvocation.Status.FAILURE if item.error else ToolInvocation.Status.SUCCESS,
        "started_at": item.started_at or item.occurred_at,
        "finished_at": item.occurred_at,
    }
    if item.error:
        data["error"] = item.error
    return IncomingItem(
        index=index,
        data=data,
        body_sha256=canonical_sha256(data),
        client_id=CLIENT_ID_PREFIX + item.idempotency_key,
    )
