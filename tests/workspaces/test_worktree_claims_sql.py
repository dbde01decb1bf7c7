"""PostgreSQL's one-statement grant and release (workspaces/worktrees/claims.py, _change_unlocked)
write what the locked path writes.

The same claim and release of one worktree by one agent, once through the single statement and
once through the path under the row lock (forced on PostgreSQL): the worktree row and the events
must agree in every column but ids and timestamps. PostgreSQL only: the single statement (on
xmin, in autocommit) does not exist on SQLite, where the locked path is the only one.
"""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from config.actors import Actor
from ledger.models import Event
from workspaces.models import Worktree
from workspaces.worktrees import claims
from workspaces.worktrees.claims import worktree_claim, worktree_release
from workspaces.worktrees.services import worktree_create

pytestmark = [
    pytest.mark.django_db(transaction=True),  # the single statement applies only in autocommit
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the one-statement paths are PostgreSQL's"),
]

TIMESTAMPS = {"created_at", "updated_at", "claimed_at", "released_at", "lease_expires_at"}


def _state(worktree_id: int, since_event: int) -> dict:
    """The worktree row and the events written since ``since_event``, but ids and timestamps."""
    row = Worktree.objects.filter(pk=worktree_id).values()[0]
    events = Event.objects.filter(pk__gt=since_event).order_by("pk").values()
    return {
        "worktree": {k: v for k, v in row.items() if k not in TIMESTAMPS | {"id"}},
        "events": [{k: v for k, v in event.items() if k not in TIMESTAMPS | {"id"}} for event in events],
    }


def _last_event() -> int:
    return Event.objects.order_by("-pk").values_list("pk", flat=True).first() or 0


def _claim_and_release(worktree: Worktree, actor: Actor) -> tuple[dict, dict, list[str]]:
    """The state after a claim, after its release, and the statements both sent."""
    with CaptureQueriesContext(connection) as queries:
        start = _last_event()
        worktree_claim(actor=actor, agent=actor.agent, worktree=worktree.pk)
        claimed = _state(worktree.pk, start)
        start = _last_event()
        worktree_release(actor=actor, worktree=worktree.pk)
        released = _state(worktree.pk, start)
    return claimed, released, [query["sql"] for query in queries.captured_queries]


def test_a_grant_and_a_release_write_the_same_rows_on_both_paths(repository, actor, monkeypatch):
    worktree, _ = worktree_create(actor=actor, repository=repository, type="feat", name="parity")

    fast_claimed, fast_released, fast_sql = _claim_and_release(worktree, actor)
    monkeypatch.setattr(claims, "single_statement_commits", lambda: False)
    general_claimed, general_released, general_sql = _claim_and_release(worktree, actor)

    assert sum("WITH changed" in sql for sql in fast_sql) == 2  # both went through the single statement
    assert not any("WITH changed" in sql for sql in general_sql)
    assert fast_claimed == general_claimed
    assert fast_released == general_released
    assert [e["name"] for e in fast_claimed["events"] + fast_released["events"]] == [
        "worktree.claimed",
        "worktree.released",
    ]
    assert fast_claimed["worktree"]["holder_id"] == actor.agent.pk
    assert fast_released["worktree"]["holder_id"] is None
