"""The domain event log. Every service that changes something that people or
webhooks care about records an Event in the same transaction."""

from typing import Any

from config.side_effects import enqueue_task
from ledger.insert_sql import InsertSelect
from ledger.models import Event
from ledger.tasks import webhooks_dispatch_task
from ledger.webhooks import webhooks_enabled


def event_record(
    *, name: str, subject_type: str, subject_id: Any, actor: str = "system", payload: dict | None = None
) -> Event:
    """Append an event; the caller's transaction decides whether it happened.

    When an active webhook subscription exists, ``webhooks_dispatch_task`` is queued for the
    event after that transaction commits (never for a rolled-back one). This runs on every
    claim and session write, so whether one exists comes from a cached flag: no query is added
    per event (see ledger/webhooks.py for how the flag is kept and what the sweep repairs).
    """
    event = Event.objects.create(
        **event_fields(name=name, subject_type=subject_type, subject_id=subject_id, actor=actor, payload=payload)
    )
    event_dispatch(event_id=event.pk)
    return event


def event_fields(
    *, name: str, subject_type: str, subject_id: Any, actor: str = "system", payload: dict | None = None
) -> dict[str, Any]:
    """An event row's fields: what ``event_record`` creates, and what a fast path fills
    ``event_insert_sql``'s parameters with."""
    return {
        "name": name,
        "subject_type": subject_type,
        "subject_id": str(subject_id),
        "actor": actor,
        "payload": payload or {},
    }


def event_insert_sql(*, source: str = "", exprs: dict[str, str] | None = None) -> InsertSelect:
    """The insert of one Event per row of ``source``, for a fast path to embed in its own
    statement; it returns the event's id. ``exprs`` computes fields from the source row (see
    InsertSelect); the others are parameters, filled from ``event_fields`` or given. The caller
    then calls ``event_dispatch`` with the id, as ``event_record`` does."""
    return InsertSelect(Event, source=source, exprs=exprs, returning="id")


def event_dispatch(*, event_id: int) -> None:
    """What follows the insert of every event: for a service that inserts its event in its own
    SQL (board/services.py, a claim's single statement), and for ``event_record``."""
    if webhooks_enabled():
        enqueue_task(webhooks_dispatch_task, event_id)
