"""Fast paths for the event endpoint, where batches of 1,000 are common.

``stream_event_fast_validate`` accepts only items that are plainly valid and returns what
``StreamEventInput`` would; anything else returns None and goes through the serializer.
``stream_event_render`` gives what ``StreamEventOutput`` would. Tests hold both to the
serializers they shortcut.
"""

import json
from datetime import UTC

from django.conf import settings
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from config.api.fields import datetime_output
from config.redaction import redact_json
from sessions_app.models import StreamEvent

_TYPES = frozenset(StreamEvent.Type.values)
_KEYS = frozenset({"id", "type", "payload", "timestamp"})


def stream_event_fast_validate(item: dict) -> dict | None:
    if not item.keys() <= _KEYS:
        return None
    kind = item.get("type")
    if not isinstance(kind, str) or kind not in _TYPES:
        return None
    data = {"type": kind}
    if "id" in item:
        client_id = item["id"]
        if client_id is not None and (
            not isinstance(client_id, str) or not 0 < len(client_id) <= 128 or client_id.strip() != client_id
        ):
            return None
        data["id"] = client_id
    payload = item.get("payload", {})
    if not isinstance(payload, dict):
        return None
    if payload:
        try:
            # allow_nan=False: a number out of the float range (config.api.parsers) is left to the
            # serializer, which refuses it naming the field; the size check serialises anyway.
            size = len(json.dumps(payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8"))
        except ValueError:
            return None
        if size > settings.EVENT_PAYLOAD_MAX_BYTES:
            return None
    data["payload"] = redact_json(payload)  # secrets never reach the database (config/redaction.py)
    if "timestamp" in item:
        raw = item["timestamp"]
        if not isinstance(raw, str):
            return None
        try:
            parsed = parse_datetime(raw)
        except ValueError:
            return None
        if parsed is None or timezone.is_naive(parsed):
            return None
        try:
            # In UTC, as the serializer (DRF's enforce_timezone) gives it: PostgreSQL refuses an
            # offset past ±15:59 (Python takes up to ±23:59), and near year 1 or 9999 this overflows.
            data["timestamp"] = parsed.astimezone(UTC)
        except OverflowError:
            return None
    return data


def stream_event_render(event: StreamEvent) -> dict:
    return {
        "seq": event.seq,
        "client_id": event.client_id,
        "type": event.type,
        "payload": event.payload,
        "timestamp": datetime_output(event.timestamp),
        "created_at": datetime_output(event.created_at),
    }
