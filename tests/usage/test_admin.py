"""The usage rows in the admin: listed and read, never added or changed there."""

import datetime as dt

import pytest

from tests.factories import SessionFactory
from usage.models import UsageRecord

pytestmark = pytest.mark.django_db


def test_staff_read_usage_rows_and_cannot_add_or_change_them(staff_client, agent):
    row = UsageRecord.objects.create(
        agent=agent,
        session=SessionFactory(agent=agent, id="s-admin"),
        model="claude-sonnet-4-5",
        input_tokens=10,
        occurred_at=dt.datetime(2026, 11, 20, tzinfo=dt.UTC),
        source=UsageRecord.Source.OTLP_LOG,
        idempotency_key="k",
    )

    listing = staff_client.get("/admin/usage/usagerecord/")
    detail = staff_client.get(f"/admin/usage/usagerecord/{row.pk}/change/")
    add = staff_client.get("/admin/usage/usagerecord/add/")
    change = staff_client.post(f"/admin/usage/usagerecord/{row.pk}/change/", {"input_tokens": 99})

    assert listing.status_code == 200
    assert b"claude-sonnet-4-5" in listing.content
    assert detail.status_code == 200
    assert add.status_code == 403
    assert change.status_code == 403
    row.refresh_from_db()
    assert row.input_tokens == 10
