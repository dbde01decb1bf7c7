"""The tool-call ledger: record calls, finish running ones. Never rewrite or delete."""

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from config.api.errors import DomainError
from config.idempotency import IncomingItem, ItemResult, canonical_sha256
from config.redaction import summarize
from ledger.models import ToolInvocation
from sessions_app.live import session_push
from sessions_app.models import AgentSession
from sessions_app.services import session_records_write

Status = ToolInvocation.Status
_MISSING = object()


def _duration_ms(started_at, finished_at) -> int | None:
    if started_at is None or finished_at is None:
        return None
    return max(0, int((finished_at - started_at).total_seconds() * 1000))


def _summaries(data: dict) -> dict:
    """Redacted, capped summaries and the full-input hash, from an item's input/output."""
    cap = settings.TOOL_SUMMARY_MAX_CHARS
    fields = {}
    raw_input = data.get("input", _MISSING)
    if raw_input is not _MISSING:
        fields["input_summary"] = summarize(raw_input, max_chars=cap)
        fields["input_sha256"] = canonical_sha256(raw_input)
    if data.get("output") is not None:
        fields["output_summary"] = summarize(data["output"], max_chars=cap)
    if data.get("error"):
        fields["error"] = summarize(data["error"], max_chars=cap)
    return fields


def tool_calls_record(*, session: AgentSession, items: list[IncomingItem]) -> list[ItemResult]:
    """Record tool calls, running or already finished, idempotently by client id."""

    def create(fresh: list[IncomingItem]) -> list[ToolInvocation]:
        now = timezone.now()
        rows = []
        for item in fresh:
            data = item.data
            status = data.get("status") or Status.RUNNING
            started_at = data.get("started_at") or now
            finished_at = None if status == Status.RUNNING else (data.get("finished_at") or now)
            if finished_at is not None and finished_at < started_at:
                finished_at = started_at
            rows.append(
                ToolInvocation(
                    session=session,
                    agent=session.agent,  # the answer names its slug: no query per row
                    tool_name=data["tool_name"],
                    status=status,
                    started_at=started_at,
                    finished_at=finished_at,
                    duration_ms=_duration_ms(started_at, finished_at),
                    client_id=item.client_id,
                    body_sha256=item.body_sha256,
                    **_summaries(data),
                )
            )
        created = ToolInvocation.objects.bulk_create(rows)
        session_push(session_id=session.pk, tool_calls_created=[row.pk for row in created])
        return created

    return session_records_write(model=ToolInvocation, session=session, items=items, create_rows=create)


@transaction.atomic
def tool_call_finish(*, tool_call: ToolInvocation, data: dict) -> tuple[ToolInvocation, bool]:
    """Finish a running call once; True if this request finished it.

    A retry of the same finish answers with the stored call; any other change to a
    finished call is a 409: the ledger is append-only.
    """
    status = data["status"]
    if status == Status.RUNNING:
        raise DomainError("A tool call can only be finished: status must be success, failure or cancelled.")
    finished_at = data.get("finished_at") or timezone.now()
    fields = _summaries(data)
    # Conditional update: only a call still running changes, so two finishes can't both win.
    changed = ToolInvocation.objects.filter(pk=tool_call.pk, status=Status.RUNNING).update(
        status=status,
        finished_at=max(finished_at, tool_call.started_at),
        duration_ms=_duration_ms(tool_call.started_at, max(finished_at, tool_call.started_at)),
        **fields,
    )
    tool_call.refresh_from_db()
    if changed:
        session_push(session_id=tool_call.session_id, tool_calls_finished=[tool_call.pk])
        return tool_call, True
    if tool_call.status == status and all(getattr(tool_call, name) == value for name, value in fields.items()):
        return tool_call, False
    raise DomainError(
        f"Tool call {tool_call.pk} is already {tool_call.status}; the ledger does not rewrite finished calls.",
        code="conflict",
    )
