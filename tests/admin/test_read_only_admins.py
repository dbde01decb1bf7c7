"""Append-only records are view-only: no add, no edit, no delete, no actions."""

import pytest

from board.models import SyncedFile, TaskClaim
from ledger.models import Event, ToolInvocation
from sessions_app.models import Checkpoint, StreamEvent
from tests.admin.factories import ROW_BUILDERS, admin_url

pytestmark = pytest.mark.django_db
READ_ONLY = (StreamEvent, Checkpoint, ToolInvocation, Event, TaskClaim, SyncedFile)


@pytest.mark.parametrize("model", READ_ONLY, ids=lambda m: m._meta.label)
def test_add_change_and_delete_are_refused_and_change_nothing(admin_client, model):
    # given
    obj = ROW_BUILDERS[model]()
    before = list(model.objects.values())

    # when / then
    assert admin_client.get(admin_url(model, "add")).status_code == 403
    assert admin_client.post(admin_url(model, "add"), {}).status_code == 403
    assert admin_client.post(admin_url(model, "change", obj.pk), {}).status_code == 403
    assert admin_client.get(admin_url(model, "delete", obj.pk)).status_code == 403
    assert admin_client.post(admin_url(model, "delete", obj.pk), {"post": "yes"}).status_code == 403
    assert list(model.objects.values()) == before


@pytest.mark.parametrize("model", READ_ONLY, ids=lambda m: m._meta.label)
def test_pages_are_view_only(admin_client, model):
    obj = ROW_BUILDERS[model]()

    changelist = admin_client.get(admin_url(model, "changelist"))
    change = admin_client.get(admin_url(model, "change", obj.pk))

    assert changelist.context["action_form"] is None  # no "delete selected"
    assert change.status_code == 200
    assert change.context["has_change_permission"] is False
    assert 'name="_save"' not in change.content.decode()
