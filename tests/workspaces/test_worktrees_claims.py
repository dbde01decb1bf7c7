"""Worktree claims: one holder on a lease, a FIFO queue, release, expiry and heartbeat renewal."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from config.api.errors import DomainError
from ledger.models import Event
from sessions_app.models import Agent
from tests.factories import AgentFactory
from workspaces.models import Worktree, WorktreeClaimRequest
from workspaces.worktrees.claims import worktree_claim, worktree_leases_renew, worktree_release
from workspaces.worktrees.services import worktree_create

pytestmark = pytest.mark.django_db

TTL = timedelta(seconds=900)


@pytest.fixture
def worktree(repository, actor):
    worktree, _ = worktree_create(actor=actor, repository=repository, type="feat", name="login")
    return worktree


def _url(worktree, action: str = "") -> str:
    return f"/api/v1/worktrees/{worktree.pk}/" + (f"{action}/" if action else "")


def _claim_state(worktree) -> tuple:
    row = Worktree.objects.get(pk=worktree.pk)
    return row.holder_id, row.claimed_at, row.lease_expires_at, row.released_at


def _queue(worktree) -> list[tuple[str, str]]:
    return list(
        WorktreeClaimRequest.objects.filter(worktree=worktree).order_by("id").values_list("agent__slug", "status")
    )


def _claim_events() -> list[tuple[str, str | None]]:
    events = Event.objects.filter(name__in=["worktree.claimed", "worktree.released"]).order_by("id")
    return [(e.name, e.payload.get("agent") or e.payload.get("reason")) for e in events]


def _expire(worktree) -> None:
    Worktree.objects.filter(pk=worktree.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))


# --- Claiming -------------------------------------------------------------------------------


def test_first_claim_wins_with_a_lease(agent_client, worktree):
    # when
    before = timezone.now()
    response = agent_client.post(_url(worktree, "claim"), {}, format="json")

    # then
    assert response.status_code == 200, response.data
    assert (response.data["outcome"], response.data["position"]) == ("granted", None)
    assert response.data["worktree"]["holder"] == "claude-1"
    row = Worktree.objects.get(pk=worktree.pk)
    assert row.holder.slug == "claude-1"
    assert before + TTL <= row.lease_expires_at <= timezone.now() + TTL
    assert before <= row.claimed_at <= timezone.now()
    assert _claim_events() == [("worktree.claimed", "claude-1")]


def test_a_second_agent_gets_409_naming_the_holder_and_expiry(agent_client, other_client, worktree):
    # given
    agent_client.post(_url(worktree, "claim"), {}, format="json")
    state = _claim_state(worktree)

    # when
    response = other_client.post(_url(worktree, "claim"), {"wait": False}, format="json")

    # then
    assert response.status_code == 409
    expiry = state[2].isoformat()
    assert response.data == {
        "message": f'Worktree {worktree.pk} is held by claude-1 until {expiry}; claim with "wait": true to queue for it.',
        "holder": "claude-1",
        "lease_expires_at": expiry,
        "waiting": 0,
    }
    assert _claim_state(worktree) == state
    assert _queue(worktree) == []
    assert _claim_events() == [("worktree.claimed", "claude-1")]


def test_the_holder_claiming_again_renews_its_lease(agent_client, worktree):
    # given a claim whose lease has 10 seconds left
    agent_client.post(_url(worktree, "claim"), {}, format="json")
    Worktree.objects.filter(pk=worktree.pk).update(lease_expires_at=timezone.now() + timedelta(seconds=10))
    claimed_at = Worktree.objects.get(pk=worktree.pk).claimed_at

    # when
    response = agent_client.post(_url(worktree, "claim"), {}, format="json")

    # then
    assert (response.status_code, response.data["outcome"]) == (200, "renewed")
    row = Worktree.objects.get(pk=worktree.pk)
    assert row.lease_expires_at > timezone.now() + TTL - timedelta(seconds=5)
    assert row.claimed_at == claimed_at
    assert _claim_events() == [("worktree.claimed", "claude-1")]


def test_waiting_claimants_queue_in_order(agent_client, other_client, make_agent_client, worktree):
    # given
    agent_client.post(_url(worktree, "claim"), {}, format="json")
    third_client = make_agent_client(AgentFactory(slug="gemini-3"))

    # when
    second = other_client.post(_url(worktree, "claim"), {"wait": True}, format="json")
    third = third_client.post(_url(worktree, "claim"), {"wait": True}, format="json")
    second_again = other_client.post(_url(worktree, "claim"), {"wait": True}, format="json")

    # then
    assert [(r.status_code, r.data["outcome"], r.data["position"]) for r in (second, third, second_again)] == [
        (202, "queued", 1),
        (202, "queued", 2),
        (202, "queued", 1),
    ]
    assert second.data["worktree"]["holder"] == "claude-1"
    assert _queue(worktree) == [("codex-2", "waiting"), ("gemini-3", "waiting")]


def test_release_grants_the_first_waiting_agent(agent_client, other_client, make_agent_client, worktree):
    # given claude-1 holds it and codex-2 then gemini-3 wait
    agent_client.post(_url(worktree, "claim"), {}, format="json")
    third_client = make_agent_client(AgentFactory(slug="gemini-3"))
    other_client.post(_url(worktree, "claim"), {"wait": True}, format="json")
    third_client.post(_url(worktree, "claim"), {"wait": True}, format="json")

    # when
    first = agent_client.post(_url(worktree, "release"), {}, format="json")
    second = other_client.post(_url(worktree, "release"), format="json")

    # then each release hands it to the next in line
    assert (first.status_code, first.data["holder"]) == (200, "codex-2")
    assert (second.status_code, second.data["holder"]) == (200, "gemini-3")
    assert _queue(worktree) == [("codex-2", "granted"), ("gemini-3", "granted")]
    row = Worktree.objects.get(pk=worktree.pk)
    assert row.lease_expires_at > timezone.now() + TTL - timedelta(seconds=5)
    assert _claim_events() == [
        ("worktree.claimed", "claude-1"),
        ("worktree.released", "released"),
        ("worktree.claimed", "codex-2"),
        ("worktree.released", "released"),
        ("worktree.claimed", "gemini-3"),
    ]
    granted = Event.objects.filter(name="worktree.claimed").order_by("id").last()
    assert granted.actor == "agent:codex-2"  # the release that caused it
    assert granted.payload["from_queue"] is True


def test_release_with_nobody_waiting_frees_the_worktree(agent_client, worktree):
    agent_client.post(_url(worktree, "claim"), {}, format="json")
    response = agent_client.post(_url(worktree, "release"), {}, format="json")
    assert (response.status_code, response.data["holder"], response.data["lease_expires_at"]) == (200, None, None)
    assert response.data["released_at"] is not None
    released = Event.objects.get(name="worktree.released")
    assert released.payload["holder"] == Agent.objects.get(slug="claude-1").pk


# --- Refusals: nothing changes --------------------------------------------------------------


def test_another_agent_cannot_release(agent_client, other_client, worktree):
    agent_client.post(_url(worktree, "claim"), {}, format="json")
    state, events = _claim_state(worktree), Event.objects.count()

    response = other_client.post(_url(worktree, "release"), {}, format="json")

    assert response.status_code == 403
    assert response.data["message"] == f"Worktree {worktree.pk} is held by another agent (claude-1)."
    assert (_claim_state(worktree), Event.objects.count()) == (state, events)


def test_releasing_an_unclaimed_worktree_is_409(agent_client, worktree):
    events = Event.objects.count()
    response = agent_client.post(_url(worktree, "release"), {}, format="json")
    assert response.status_code == 409
    assert response.data["message"] == f"Worktree {worktree.pk} is not claimed; nothing to release."
    assert Event.objects.count() == events


def test_a_release_after_the_lease_expired_is_refused(agent_client, worktree):
    # given claude-1's lease ran out
    agent_client.post(_url(worktree, "claim"), {}, format="json")
    _expire(worktree)
    state, events = _claim_state(worktree), Event.objects.count()

    # when it releases late
    response = agent_client.post(_url(worktree, "release"), {}, format="json")

    # then
    assert response.status_code == 409
    assert response.data["message"].startswith(f"Your lease on worktree {worktree.pk} expired at ")
    assert (_claim_state(worktree), Event.objects.count()) == (state, events)


def test_an_expired_lease_goes_to_the_queue_before_a_newcomer(agent_client, other_client, make_agent_client, worktree):
    # given claude-1 held it, codex-2 waits, and the lease expired
    agent_client.post(_url(worktree, "claim"), {}, format="json")
    other_client.post(_url(worktree, "claim"), {"wait": True}, format="json")
    _expire(worktree)
    newcomer = make_agent_client(AgentFactory(slug="newcomer"))

    # when a newcomer claims
    response = newcomer.post(_url(worktree, "claim"), {}, format="json")

    # then the waiting agent got it (and keeps it: the newcomer's 409 rolled nothing back)
    assert response.status_code == 409
    assert response.data["holder"] == "codex-2"
    assert Worktree.objects.get(pk=worktree.pk).holder.slug == "codex-2"
    assert _queue(worktree) == [("codex-2", "granted")]
    assert _claim_events() == [
        ("worktree.claimed", "claude-1"),
        ("worktree.released", "lease expired"),
        ("worktree.claimed", "codex-2"),
    ]


def test_the_first_waiting_agent_claiming_after_expiry_gets_it(agent_client, other_client, worktree):
    agent_client.post(_url(worktree, "claim"), {}, format="json")
    other_client.post(_url(worktree, "claim"), {"wait": True}, format="json")
    _expire(worktree)

    response = other_client.post(_url(worktree, "claim"), {"wait": True}, format="json")

    assert (response.status_code, response.data["outcome"], response.data["worktree"]["holder"]) == (
        200,
        "granted",
        "codex-2",
    )


def test_an_expired_lease_with_no_queue_goes_to_the_next_claimant(agent_client, other_client, worktree):
    agent_client.post(_url(worktree, "claim"), {}, format="json")
    _expire(worktree)

    response = other_client.post(_url(worktree, "claim"), {}, format="json")

    assert (response.status_code, response.data["worktree"]["holder"]) == (200, "codex-2")
    assert _claim_events() == [
        ("worktree.claimed", "claude-1"),
        ("worktree.released", "lease expired"),
        ("worktree.claimed", "codex-2"),
    ]
    # and the old holder's late release is refused: its lease was lost (409 lease_lost), nothing changes
    late = agent_client.post(_url(worktree, "release"), {}, format="json")
    assert (late.status_code, late.data["code"], late.data["reason"]) == (409, "lease_lost", "lease expired")
    worktree.refresh_from_db()
    assert worktree.holder.slug == "codex-2"


def test_staff_do_not_claim(staff_client, worktree):
    response = staff_client.post(_url(worktree, "claim"), {}, format="json")
    assert (response.status_code, response.data["message"]) == (403, "Only agents claim worktrees.")
    assert _claim_state(worktree) == (None, None, None, None)


def test_staff_may_release_any_claim_and_the_queue_moves(staff_client, agent_client, other_client, worktree):
    agent_client.post(_url(worktree, "claim"), {}, format="json")
    other_client.post(_url(worktree, "claim"), {"wait": True}, format="json")
    _expire(worktree)  # staff may release even an expired lease

    response = staff_client.post(_url(worktree, "release"), {}, format="json")

    assert (response.status_code, response.data["holder"]) == (200, "codex-2")
    released = Event.objects.filter(name="worktree.released").get()
    assert (released.actor, released.payload["reason"]) == ("user:engineer", "released by staff (user:engineer)")


def test_a_paused_agent_cannot_claim(agent, agent_client, worktree):
    Agent.objects.filter(pk=agent.pk).update(status=Agent.Status.PAUSED)
    response = agent_client.post(_url(worktree, "claim"), {}, format="json")
    assert response.status_code == 409
    assert _claim_state(worktree) == (None, None, None, None)


@pytest.mark.parametrize("body", [{"wait": "yes"}, {"wait": 1}, {"queue": True}, []])
def test_bad_claim_bodies_are_400_and_change_nothing(agent_client, worktree, body):
    response = agent_client.post(_url(worktree, "claim"), body, format="json")
    assert response.status_code == 400
    assert _claim_state(worktree) == (None, None, None, None)
    assert _queue(worktree) == []


def test_release_refuses_a_body_with_fields(agent_client, worktree):
    agent_client.post(_url(worktree, "claim"), {}, format="json")
    state = _claim_state(worktree)
    response = agent_client.post(_url(worktree, "release"), {"force": True}, format="json")
    assert response.status_code == 400
    assert _claim_state(worktree) == state


def test_unknown_worktree_is_404_and_no_key_is_401(agent_client, worktree):
    assert agent_client.post("/api/v1/worktrees/999999/claim/", {}, format="json").status_code == 404
    assert agent_client.post("/api/v1/worktrees/99999999999999999999/claim/", {}, format="json").status_code == 404
    assert APIClient().post(_url(worktree, "claim"), {}, format="json").status_code == 401
    assert _claim_state(worktree) == (None, None, None, None)


def test_a_removed_worktree_cannot_be_claimed(actor, agent, worktree):
    Worktree.objects.filter(pk=worktree.pk).update(status=Worktree.Status.REMOVED)
    with pytest.raises(DomainError) as refused:
        worktree_claim(actor=actor, agent=agent, worktree=worktree)
    assert (refused.value.code, refused.value.message) == ("conflict", f"Worktree {worktree.pk} is removed.")


def test_an_agent_claims_only_for_itself(actor, other_agent, worktree):
    with pytest.raises(DomainError) as refused:
        worktree_claim(actor=actor, agent=other_agent, worktree=worktree)
    assert refused.value.code == "forbidden"
    assert _claim_state(worktree) == (None, None, None, None)


# --- Heartbeat renews, never revives --------------------------------------------------------


def test_the_heartbeat_renews_the_lease(agent_client, worktree):
    agent_client.post(_url(worktree, "claim"), {}, format="json")
    Worktree.objects.filter(pk=worktree.pk).update(lease_expires_at=timezone.now() + timedelta(seconds=10))

    response = agent_client.post("/api/v1/agents/me/heartbeat/")

    assert response.status_code == 200
    assert Worktree.objects.get(pk=worktree.pk).lease_expires_at > timezone.now() + TTL - timedelta(seconds=5)


def test_the_heartbeat_does_not_revive_an_expired_lease(agent_client, worktree):
    agent_client.post(_url(worktree, "claim"), {}, format="json")
    _expire(worktree)
    state = _claim_state(worktree)

    response = agent_client.post("/api/v1/agents/me/heartbeat/")

    assert response.status_code == 200
    assert _claim_state(worktree) == state


def test_another_agents_heartbeat_renews_nothing_of_ours(agent_client, other_client, worktree):
    agent_client.post(_url(worktree, "claim"), {}, format="json")
    Worktree.objects.filter(pk=worktree.pk).update(lease_expires_at=timezone.now() + timedelta(seconds=10))
    state = _claim_state(worktree)

    other_client.post("/api/v1/agents/me/heartbeat/")

    assert _claim_state(worktree) == state


def test_leases_renew_counts_only_valid_leases(actor, agent, repository, worktree):
    second, _ = worktree_create(actor=actor, repository=repository, type="fix", name="bug")
    worktree_claim(actor=actor, agent=agent, worktree=worktree)
    worktree_claim(actor=actor, agent=agent, worktree=second)
    _expire(second)
    assert worktree_leases_renew(agent=agent) == 1
    assert Worktree.objects.get(pk=second.pk).lease_expires_at < timezone.now()


def test_release_returns_the_row_as_stored(actor, agent, worktree):
    worktree_claim(actor=actor, agent=agent, worktree=worktree)
    released = worktree_release(actor=actor, worktree=worktree)
    assert (released.holder_id, released.lease_expires_at) == (None, None)


def test_a_refused_claim_is_not_logged_as_a_warning_but_other_conflicts_are(
    agent_client, other_client, worktree, caplog
):
    # given a held worktree
    agent_client.post(_url(worktree, "claim"), {}, format="json")

    # when another agent's claim is refused, and it then tries to release the worktree
    with caplog.at_level("WARNING", logger="django.request"):
        refused = other_client.post(_url(worktree, "claim"), {}, format="json")
        released = agent_client.post(_url(worktree, "release"), {}, format="json")
        unclaimed = agent_client.post(_url(worktree, "release"), {}, format="json")

    # then the expected refusal under contention left no warning; the other 409 did
    assert (refused.status_code, released.status_code, unclaimed.status_code) == (409, 200, 409)
    logged = [r.getMessage() for r in caplog.records if r.name == "django.request"]
    assert logged == [f"Conflict: {_url(worktree, 'release')}"]
