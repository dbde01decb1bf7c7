"""A timestamp with any offset Python takes (up to ±23:59) is stored as its UTC instant on both
databases. Before: the events' fast path kept the offset, and PostgreSQL refuses one past ±15:59,
so a plainly valid batch with "+21:39" lost every item to a 400 on PostgreSQL (schemathesis found it)."""

from datetime import UTC, datetime

import pytest

from sessions_app.models import StreamEvent

pytestmark = pytest.mark.django_db

FAR_OFFSET = "2954-12-01T02:09:59.796+21:39"
AS_UTC = datetime(2954, 11, 30, 4, 30, 59, 796000, tzinfo=UTC)


def test_one_event_with_a_far_offset_is_stored_in_utc(agent_client, session):
    response = agent_client.post(
        f"/api/v1/sessions/{session.pk}/events/", {"type": "log", "timestamp": FAR_OFFSET}, format="json"
    )

    assert response.status_code == 201, response.content
    assert StreamEvent.objects.get().timestamp == AS_UTC
    assert response.json()["timestamp"] == "2954-11-30T04:30:59.796000Z"


@pytest.mark.parametrize("with_ids", [False, True])
def test_a_plain_batch_with_a_far_offset_stores_every_item(agent_client, session, with_ids):
    items = [{"type": "log", "timestamp": FAR_OFFSET}, {"type": "diff", "timestamp": "0282-11-26T12:37:01-03:01"}]
    if with_ids:
        items = [{**item, "id": f"e{n}"} for n, item in enumerate(items)]

    response = agent_client.post(f"/api/v1/sessions/{session.pk}/events/", items, format="json")

    assert response.status_code == 201, response.content
    assert [e.timestamp for e in StreamEvent.objects.order_by("seq")] == [
        AS_UTC,
        datetime(282, 11, 26, 15, 38, 1, tzinfo=UTC),
    ]


@pytest.mark.parametrize("timestamp", ["0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00"])
def test_a_timestamp_whose_utc_instant_has_no_date_is_400_and_nothing_is_stored(agent_client, session, timestamp):
    response = agent_client.post(
        f"/api/v1/sessions/{session.pk}/events/", [{"type": "log", "timestamp": timestamp}], format="json"
    )

    assert response.status_code == 400
    assert response.json()["results"][0]["errors"]["timestamp"]
    assert StreamEvent.objects.count() == 0
