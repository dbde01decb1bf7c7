"""PostgreSQL's one-statement grant and release (workspaces/worktrees/claims.py, _change_unlocked):
what they write, and that any change between the unlocked read and the statement sends the
decision back under the row lock.

Transactional tests: the statements apply only in autocommit, outside any transaction, which is
how the API runs them. Another agent's work "between the read and the statement" runs to its
commit on its own connection, in a thread started right after the service's unlocked read.
"""

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from config.actors import Actor
from config.api.errors import DomainError
from ledger.models import Event
from workspaces.models import Worktree, WorktreeClaimRequest
from workspaces.worktrees import claims
from workspaces.worktrees.claims import worktree_claim, worktree_release
from workspaces.worktrees.services import worktree_create

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the one-statement paths are PostgreSQL's"),
]


@pytest.fixture
def worktree(repository, actor):
    worktree, _ = worktree_create(actor=actor, repository=repository, type="feat", name="fast")
    return worktree


def _events(worktree) -> list[tuple[str, dict]]:
    rows = Event.objects.filter(subject_type="worktree", subject_id=str(worktree.pk)).order_by("id")
    return [(e.name, e.payload) for e in rows if e.name in ("worktree.claimed", "worktree.released")]


def _run_elsewhere(work) -> None:
    """work() to its end on another connection, committed, before going on."""
    raised: list[BaseException] = []

    def run():
        try:
            work()
        except BaseException as exc:
            raised.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive()
    if raised:
        raise raised[0]


@pytest.fixture
def after_the_read(monkeypatch):
    """after_the_read(work): run work elsewhere right after the service's next unlocked read."""
    original = claims._claim_row
    pending = []

    def read_then_work(worktree_id, *, lock, active=True):
        row = original(worktree_id, lock=lock, active=active)
        if not lock and pending:
            _run_elsewhere(pending.pop())
        return row

    monkeypatch.setattr(claims, "_claim_row", read_then_work)
    return pending.append


def test_a_grant_and_a_release_are_a_read_and_one_statement_each(
    worktree, agent, other_agent, django_assert_num_queries
):
    base = {"repository": worktree.repository_id, "branch": "feat-fast", "path": worktree.real_path}

    # when an agent claims the free worktree, another is refused, and the holder releases it
    with django_assert_num_queries(2):
        granted = worktree_claim(actor=Actor(agent=agent), agent=agent, worktree=worktree.pk)
    with django_assert_num_queries(1), pytest.raises(DomainError):
        worktree_claim(actor=Actor(agent=other_agent), agent=other_agent, worktree=worktree.pk)
    held = Worktree.objects.get(pk=worktree.pk)
    with django_assert_num_queries(2):
        released = worktree_release(actor=Actor(agent=agent), worktree=worktree.pk)

    # then the claim held it with a lease, and the returned rows are what was stored
    assert granted.outcome == "granted"
    assert held.holder_id == agent.pk
    assert (held.claimed_at, held.lease_expires_at) == (granted.worktree.claimed_at, granted.worktree.lease_expires_at)
    assert held.lease_expires_at > timezone.now() + timedelta(seconds=30)
    row = Worktree.objects.get(pk=worktree.pk)
    assert (row.holder_id, row.lease_expires_at, row.released_at) == (None, None, released.released_at)
    assert released.holder is None
    # and each change recorded the event the locked path records, by the agent
    assert _events(worktree) == [
        ("worktree.claimed", {**base, "agent": agent.slug, "holder": agent.pk, "from_queue": False}),
        ("worktree.released", {**base, "holder": agent.pk, "reason": "released"}),
    ]
    assert set(
        Event.objects.filter(name__startswith="worktree.c", subject_id=str(worktree.pk)).values_list("actor", flat=True)
    ) == {f"agent:{agent.slug}"}


def test_a_place_taken_in_the_queue_after_the_release_read_is_granted_the_worktree(
    worktree, agent, other_agent, after_the_read
):
    # given an agent holding the worktree
    worktree_claim(actor=Actor(agent=agent), agent=agent, worktree=worktree.pk)

    # when another agent queues for it between the holder's read and its release statement
    queued = []
    after_the_read(
        lambda: queued.append(
            worktree_claim(actor=Actor(agent=other_agent), agent=other_agent, worktree=worktree.pk, wait=True)
        )
    )
    released = worktree_release(actor=Actor(agent=agent), worktree=worktree.pk)

    # then the release saw the queue (under the lock) and handed the worktree on
    assert queued[0].outcome == "queued"
    assert released.holder_id == other_agent.pk
    assert Worktree.objects.get(pk=worktree.pk).holder_id == other_agent.pk
    assert list(WorktreeClaimRequest.objects.values_list("agent_id", "status")) == [(other_agent.pk, "granted")]
    assert [(name, payload.get("holder"), payload.get("from_queue")) for name, payload in _events(worktree)] == [
        ("worktree.claimed", agent.pk, False),
        ("worktree.released", agent.pk, None),
        ("worktree.claimed", other_agent.pk, True),
    ]


def test_a_claim_granted_to_another_after_the_read_is_refused_under_the_lock(
    worktree, agent, other_agent, after_the_read
):
    # when another agent takes the free worktree between our read and our claim statement
    after_the_read(lambda: worktree_claim(actor=Actor(agent=other_agent), agent=other_agent, worktree=worktree.pk))
    with pytest.raises(DomainError) as refused:
        worktree_claim(actor=Actor(agent=agent), agent=agent, worktree=worktree.pk)

    # then ours is refused naming the holder, and only its grant happened
    assert refused.value.code == "conflict"
    assert refused.value.extra["holder"] == other_agent.slug
    assert Worktree.objects.get(pk=worktree.pk).holder_id == other_agent.pk
    assert [payload["holder"] for name, payload in _events(worktree)] == [other_agent.pk]


def test_a_release_after_the_lease_expired_is_still_refused_and_changes_nothing(worktree, agent):
    # given a lease that ran out
    worktree_claim(actor=Actor(agent=agent), agent=agent, worktree=worktree.pk)
    Worktree.objects.filter(pk=worktree.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    before = Worktree.objects.values().get(pk=worktree.pk)

    # when the old holder releases
    with pytest.raises(DomainError) as refused:
        worktree_release(actor=Actor(agent=agent), worktree=worktree.pk)

    # then
    assert refused.value.code == "conflict"
    assert Worktree.objects.values().get(pk=worktree.pk) == before
    assert [name for name, _ in _events(worktree)] == ["worktree.claimed"]
