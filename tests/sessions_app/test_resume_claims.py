"""Resume gives back the worktrees the agent still holds; heartbeats keep those leases alive."""

from datetime import timedelta

import pytest
from django.utils import timezone

from workspaces.models import Repository, Worktree

pytestmark = pytest.mark.django_db


def make_worktree(name: str, *, holder=None, lease_in: timedelta | None = None, status="active") -> Worktree:
    repository, _ = Repository.objects.get_or_create(name="app", path="/src/app")
    return Worktree.objects.create(
        repository=repository,
        type="feat",
        name=name,
        branch=f"feat-{name}",
        real_path=f"/src/feat-{name}",
        status=status,
        holder=holder,
        claimed_at=timezone.now() if holder else None,
        lease_expires_at=timezone.now() + lease_in if lease_in is not None else None,
    )


def test_resume_lists_the_worktrees_the_agent_holds_on_a_live_lease(agent_client, session, agent, other_agent):
    # given
    held = make_worktree("held", holder=agent, lease_in=timedelta(minutes=10))
    make_worktree("lapsed", holder=agent, lease_in=timedelta(seconds=-1))
    make_worktree("theirs", holder=other_agent, lease_in=timedelta(minutes=10))
    make_worktree("free")

    # when
    body = agent_client.get(f"/api/v1/sessions/{session.pk}/resume/").json()

    # then
    assert [(w["id"], w["holder"], w["branch"]) for w in body["claimed_worktrees"]] == [
        (held.pk, "claude-1", "feat-held")
    ]


def test_resume_lists_no_worktrees_when_none_are_held(agent_client, session):
    assert agent_client.get(f"/api/v1/sessions/{session.pk}/resume/").json()["claimed_worktrees"] == []


def test_a_session_heartbeat_renews_the_agents_live_leases_only(agent_client, session, agent, other_agent):
    # given
    held = make_worktree("held", holder=agent, lease_in=timedelta(seconds=30))
    lapsed = make_worktree("lapsed", holder=agent, lease_in=timedelta(seconds=-1))
    theirs = make_worktree("theirs", holder=other_agent, lease_in=timedelta(seconds=30))
    before = {w.pk: w.lease_expires_at for w in (held, lapsed, theirs)}

    # when
    response = agent_client.post(f"/api/v1/sessions/{session.pk}/heartbeat/")

    # then
    assert response.status_code == 200
    after = dict(Worktree.objects.values_list("pk", "lease_expires_at"))
    assert after[held.pk] > timezone.now() + timedelta(minutes=10)  # WORKTREE_LEASE_TTL_SECONDS = 900
    assert (after[lapsed.pk], after[theirs.pk]) == (before[lapsed.pk], before[theirs.pk])


def test_a_session_heartbeat_of_another_agent_renews_nothing(other_client, session, agent):
    held = make_worktree("held", holder=agent, lease_in=timedelta(seconds=30))

    assert other_client.post(f"/api/v1/sessions/{session.pk}/heartbeat/").status_code == 403

    assert Worktree.objects.get(pk=held.pk).lease_expires_at == held.lease_expires_at
