"""The embedded default's note of the tasks this process pushes itself (board/live.py) stays bounded."""

from datetime import timedelta

import pytest
from django.utils import timezone

from board import live


@pytest.fixture
def pushes(monkeypatch):
    notes: dict = {}
    monkeypatch.setattr(live, "local_pushes", notes)
    monkeypatch.setattr(live, "LOCAL_PUSHES_KEPT", 10)
    return notes


def test_old_notes_are_dropped_once_there_are_too_many_and_recent_ones_kept(pushes):
    now = timezone.now()
    long_ago = now - live.LOCAL_PUSHES_FOR - timedelta(seconds=1)

    # given ten notes from long ago: not too many yet, all kept
    live.local_pushes_note(range(10), noted=long_ago)
    assert len(pushes) == 10

    # when more are noted now
    live.local_pushes_note([10, 11, 3], noted=now)

    # then the old ones went, and the recent ones (3 noted again) stay
    assert pushes == {10: now, 11: now, 3: now}


def test_recent_notes_are_never_dropped_however_many(pushes):
    now = timezone.now()

    live.local_pushes_note(range(25), noted=now - timedelta(seconds=5))
    live.local_pushes_note([99], noted=now)

    assert len(pushes) == 26
