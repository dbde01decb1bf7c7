"""Worktrees in the admin: the release action frees a held claim."""

import pytest

from ledger.models import Event
from tests.admin.factories import WorktreeFactory, admin_url
from workspaces.models import Worktree

pytestmark = pytest.mark.django_db


def test_release_action_frees_held_worktrees_and_skips_free_ones(admin_client):
    # given
    held = WorktreeFactory(held=True)
    holder_id = held.holder_id
    free = WorktreeFactory()
    held_not_selected = WorktreeFactory(held=True)

    # when
    response = admin_client.post(
        admin_url(Worktree, "changelist"),
        {"action": "release_claims", "_selected_action": [held.pk, free.pk]},
        follow=True,
    )

    # then
    assert [m.message for m in response.context["messages"]] == ["1 worktree claim(s) released; 1 not held."]
    held.refresh_from_db()
    assert (held.holder_id, held.lease_expires_at) == (None, None)
    assert held.released_at is not None
    assert Worktree.objects.get(pk=free.pk).released_at is None
    assert Worktree.objects.get(pk=held_not_selected.pk).holder_id is not None
    event = Event.objects.get(name="worktree.released")
    assert (event.subject_id, event.actor, event.payload["holder"]) == (str(held.pk), "user:admin", holder_id)
