"""The event fast paths must agree with the serializers they shortcut."""

import pytest
from django.utils import timezone

from sessions_app.api.fast import stream_event_fast_validate, stream_event_render
from sessions_app.api.serializers import StreamEventInput, StreamEventOutput
from tests.factories import StreamEventFactory

ITEMS = [
    {"type": "log"},
    {"type": "log", "payload": {"line": "hello", "n": 3}},
    {"type": "diff", "id": "e-1", "payload": {}},
    {"type": "milestone", "id": None},
    {"type": "tool_started", "timestamp": "2026-01-01T10:00:00Z"},
    {"type": "log", "timestamp": "2026-01-01T10:00:00+02:00"},
    {"type": "log", "timestamp": "2026-01-01T10:00:00"},
    {"type": "log", "timestamp": "yesterday"},
    {"type": "log", "timestamp": 5},
    {"type": "nope"},
    {"type": 3},
    {"type": "log", "id": ""},
    {"type": "log", "id": " padded "},
    {"type": "log", "id": "x" * 129},
    {"type": "log", "id": 7},
    {"type": "log", "payload": [1]},
    {"type": "log", "payload": None},
    {"type": "log", "colour": "red"},
    {"type": "log", "payload": {"big": "x" * 300_000}},
    {},
]


@pytest.mark.parametrize("item", ITEMS)
def test_fast_validation_accepts_only_what_the_serializer_accepts_and_means_the_same(item):
    serializer = StreamEventInput(data=item)
    valid = serializer.is_valid()

    fast = stream_event_fast_validate(item)

    if fast is None:
        return  # the serializer decides: nothing to compare
    assert valid, f"fast path accepted an item the serializer refuses: {serializer.errors}"
    expected = dict(serializer.validated_data)
    assert fast["type"] == expected["type"]
    assert fast.get("payload", {}) == expected.get("payload", {})
    assert fast.get("id") == expected.get("id")
    if "timestamp" in expected:
        assert fast["timestamp"] == expected["timestamp"]


def test_the_fast_path_takes_the_common_items():
    assert stream_event_fast_validate({"type": "log", "payload": {"line": "x"}}) == {
        "type": "log",
        "payload": {"line": "x"},
    }
    assert stream_event_fast_validate({"type": "log", "id": "a", "timestamp": "2026-01-01T10:00:00Z"})["id"] == "a"


@pytest.mark.django_db
def test_rendering_matches_the_output_serializer():
    event = StreamEventFactory(payload={"a": [1, 2]}, client_id="c-1", timestamp=timezone.now())

    assert stream_event_render(event) == StreamEventOutput(event).data
