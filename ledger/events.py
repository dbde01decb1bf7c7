"""The domain event log. Every service that changes something that people or
webhooks care about records an Event in the same transaction."""

from typing import Any

from ledger.models import Event


def event_record(
    *, name: str, subject_type: str, subject_id: Any, actor: str = "system", payload: dict | None = None
) -> Event:
    return Event.objects.create(
        name=name, subject_type=subject_type, subject_id=str(subject_id), actor=actor, payload=payload or {}
    )
