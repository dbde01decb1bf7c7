"""The claim and release endpoints' hand-written worktree output is exactly what WorktreeOutput gives,
and those endpoints make no more queries than they need."""

from datetime import timedelta

import pytest
from django.utils import timezone

from config.actors import Actor
from config.api.errors import DomainError
from workspaces.api.worktree_serializers import WorktreeOutput, worktree_render
from workspaces.models import Worktree
from workspaces.worktrees.claims import worktree_claim, worktree_release
from workspaces.worktrees.services import worktree_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def worktree(repository, actor):
    worktree, _ = worktree_create(actor=actor, repository=repository, type="review", name="7", ref="main")
    return worktree


def _serialized(worktree) -> dict:
    return dict(WorktreeOutput(Worktree.objects.select_related("repository", "holder").get(pk=worktree.pk)).data)


def test_a_free_worktree_renders_as_the_serializer_does(worktree):
    row = Worktree.objects.select_related("repository", "holder").get(pk=worktree.pk)

    assert worktree_render(row) == _serialized(worktree)


def test_the_claimed_and_released_worktrees_the_services_return_render_as_the_serializer_does(
    worktree, agent, other_agent
):
    # given a pr number and an agent queued behind the holder
    Worktree.objects.filter(pk=worktree.pk).update(pr_number=7)
    claimed = worktree_claim(actor=Actor(agent=agent), agent=agent, worktree=worktree.pk)
    worktree_claim(actor=Actor(agent=other_agent), agent=other_agent, worktree=worktree.pk, wait=True)

    # then the claim's row, held, renders as the stored row does
    assert worktree_render(claimed.worktree) == _serialized(worktree)

    # when the holder releases it, the queued agent gets it: the returned row says so too
    released = worktree_release(actor=Actor(agent=agent), worktree=worktree.pk)
    assert worktree_render(released) == _serialized(worktree)
    assert worktree_render(released)["holder"] == other_agent.slug

    # and with nobody waiting, the released row is free
    Worktree.objects.filter(pk=worktree.pk).update(lease_expires_at=timezone.now() + timedelta(minutes=1))
    freed = worktree_release(actor=Actor(agent=other_agent), worktree=worktree.pk)
    assert worktree_render(freed) == _serialized(worktree)
    assert worktree_render(freed)["holder"] is None


def test_a_refused_claim_is_one_query_and_in_a_transaction_a_grant_six_and_a_release_seven(
    worktree, agent, other_agent, django_assert_num_queries
):
    # Inside the test's transaction (as inside any caller's, and on SQLite) the one-statement paths
    # of PostgreSQL's autocommit do not apply: tests/workspaces/test_worktree_claims_unlocked.py.
    # (savepoints stand in for BEGIN and COMMIT inside the test's transaction)
    # grant: unlocked read, then in a transaction: locked read, conditional UPDATE, event INSERT
    with django_assert_num_queries(6):
        worktree_claim(actor=Actor(agent=agent), agent=agent, worktree=worktree.pk)
    # refusal: the unlocked read alone
    with django_assert_num_queries(1), pytest.raises(DomainError):
        worktree_claim(actor=Actor(agent=other_agent), agent=other_agent, worktree=worktree.pk)
    # release: unlocked read, then in a transaction: locked read, UPDATE, event INSERT, queue head
    with django_assert_num_queries(7):
        worktree_release(actor=Actor(agent=agent), worktree=worktree.pk)
