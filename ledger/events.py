"""The domain event log. Every service that changes something that people or
webhooks care about records an Event in the same transaction."""

from typing import Any

from config.side_effects import enqueue_task
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
        name=name, subject_type=subject_type, subject_id=str(subject_id), actor=actor, payload=payload or {}
    )
    event_dispatch(event_id=event.pk)
    if subject_type == "run":
        # Run events (runners/services.py) change what a card shows; the board decides which.
        # Imported here: the ledger sits below the board, and this is the one place they meet.
        from board.live import board_push_for_event

        board_push_for_event(subject_type=subject_type, payload=event.payload)
    return event


def event_dispatch(*, event_id: int) -> None:
    """What follows the insert of every event: for a service that inserts its event in its own
    SQL (board/services.py, a claim's single statement), and for ``event_record``."""
    if webhooks_enabled():
        enqueue_task(webhooks_dispatch_task, event_id)
