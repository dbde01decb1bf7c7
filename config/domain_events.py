"""The kernel's port to the domain event log, for apps below ledger (sessions_app): they record an
event here and ledger writes it (``ledger.events.event_record``, registered from
``LedgerConfig.ready()``), without importing ledger (the layers in pyproject).

One writer (a ``Provider``: config/extension_points.py), called explicitly at the call site, unlike the
hook lists of sessions_app/session_hooks.py or board/claim_gates.py: the event is part of the
service's own write, in its transaction and at the same point in its order, and its caller gets the
Event back. A missing writer is an error, never a silently dropped event.
"""

from collections.abc import Callable
from typing import Any

from config.extension_points import Provider

_writer: Provider[Callable[..., Any]] = Provider(what="domain event writer", app="ledger")


def domain_event_writer_register(*, writer: Callable[..., Any]) -> None:
    """``writer(name=..., subject_type=..., subject_id=..., actor=..., payload=...)`` stores one event.
    Registering again replaces it: ``ready()`` may run more than once."""
    _writer.register(writer)


def domain_event_record(
    *, name: str, subject_type: str, subject_id: Any, actor: str = "system", payload: dict | None = None
) -> Any:
    """Record an event through the registered writer; the caller's transaction decides whether it happened."""
    return _writer.get()(name=name, subject_type=subject_type, subject_id=subject_id, actor=actor, payload=payload)
