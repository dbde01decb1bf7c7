"""Liveness that matches what agents do: any request is a heartbeat, and a write by an agent whose
claim the reaper took back is a 409 with the machine-readable code ``lease_lost``."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from board.models import Task, TaskClaim
from board.services import task_claim
from composition.reaper import agents_reap_stale
from config.actors import Actor
from ledger.models import Event
from sessions_app import keys
from sessions_app.liveness import ACTIVITY_RESOLUTION_SECONDS
from sessions_app.models import Agent, StreamEvent
from tests.admin.factories import WorktreeFactory
from tests.factories import TaskFactory
from workspaces.models import Worktree
from workspaces.worktrees.claims import worktree_claim

pytestmark = pytest.mark.django_db
TTL = 300


@pytest.fixture(autouse=True)
def _ttl(settings):
    settings.HEARTBEAT_TTL_SECONDS = TTL
    settings.WORKTREE_LEASE_TTL_SECONDS = 900
    keys.api_key_cache_clear()
    yield
    keys.api_key_cache_clear()


def _last_heard(agent, seconds_ago: float) -> None:
    """The agent's last sign of life was this long ago (as another process would have stored it)."""
    Agent.objects.filter(pk=agent.pk).update(last_heartbeat_at=timezone.now() - timedelta(seconds=seconds_ago))
    keys.api_key_cache_clear()


def _agent_writes(call) -> int:
    with CaptureQueriesContext(connection) as queries:
        call()
    return sum(1 for q in queries.captured_queries if q["sql"].startswith('UPDATE "sessions_app_agent"'))


def test_an_agent_that_only_posts_events_keeps_its_task_and_worktree_past_the_ttl(agent_client, agent, session):
    # given an agent whose last explicit heartbeat was 290 s ago, holding a task and a worktree
    task, _ = task_claim(actor=Actor(agent=agent), agent=agent, task=TaskFactory(title="long job"))
    worktree = WorktreeFactory()
    worktree_claim(actor=Actor(agent=agent), agent=agent, worktree=worktree)
    Worktree.objects.filter(pk=worktree.pk).update(lease_expires_at=timezone.now() + timedelta(seconds=60))
    _last_heard(agent, TTL - 10)

    # when it posts an event (no heartbeat call), and the reaper runs 20 s later
    before = timezone.now()
    response = agent_client.post(f"/api/v1/sessions/{session.pk}/events/", {"type": "log"}, format="json")
    assert response.status_code == 201
    reaped = agents_reap_stale(now=timezone.now() + timedelta(seconds=20))

    # then nothing was reaped: the task is still its own, the worktree still held, its lease renewed
    assert reaped == []
    agent.refresh_from_db()
    assert agent.status == Agent.Status.ACTIVE and agent.last_heartbeat_at >= before
    task.refresh_from_db()
    assert (task.status, task.assignee_id) == (Task.Status.IN_PROGRESS, agent.pk)
    worktree.refresh_from_db()
    assert worktree.holder_id == agent.pk
    assert worktree.lease_expires_at >= before + timedelta(seconds=900)
    assert not Event.objects.filter(name="agent.stale").exists()


def test_a_busy_agent_writes_its_heartbeat_at_most_once_per_resolution(agent_client, agent):
    # given an agent last heard from a minute ago
    _last_heard(agent, 60)

    # when it sends three requests in a row: the first writes, the next ones within the window don't
    assert _agent_writes(lambda: agent_client.get("/api/v1/agents/me/")) == 1
    assert _agent_writes(lambda: agent_client.get("/api/v1/agents/me/")) == 0
    keys.api_key_cache_clear()  # even once the key is looked up again, the stored time is recent
    assert _agent_writes(lambda: agent_client.get("/api/v1/agents/me/")) == 0

    # and once the stored time is older than the resolution, the next request writes again
    _last_heard(agent, ACTIVITY_RESOLUTION_SECONDS + 1)
    assert _agent_writes(lambda: agent_client.get("/api/v1/agents/me/")) == 1


def test_a_request_brings_a_reaped_agent_back_but_a_paused_one_stays_paused(agent_client, agent):
    Agent.objects.filter(pk=agent.pk).update(status=Agent.Status.ERROR)
    _last_heard(agent, TTL + 1)

    assert agent_client.get("/api/v1/agents/me/").json()["status"] == "active"

    Agent.objects.filter(pk=agent.pk).update(status=Agent.Status.PAUSED)
    _last_heard(agent, TTL + 1)

    assert agent_client.get("/api/v1/agents/me/").json()["status"] == "paused"


def _reaped_holder_of(agent) -> tuple[Task, TaskClaim]:
    """A task the agent held until the reaper, finding it silent, took it back."""
    task, _ = task_claim(actor=Actor(agent=agent), agent=agent, task=TaskFactory(title="lost"))
    _last_heard(agent, TTL + 1)
    [reaped] = agents_reap_stale()
    assert reaped.tasks == [task.pk]
    return task, TaskClaim.objects.get(task=task, agent=agent)


@pytest.mark.parametrize(
    ("verb", "body"), [("complete", {}), ("fail", {"error": "gave up"}), ("release", {})], ids=lambda v: str(v)
)
def test_a_write_on_a_task_the_reaper_took_back_is_lease_lost(agent_client, agent, verb, body):
    # given a task the reaper took back from the agent
    task, claim = _reaped_holder_of(agent)
    events_before = Event.objects.count()

    # when the agent, still working, finishes it
    response = agent_client.post(f"/api/v1/tasks/{task.pk}/{verb}/", body, format="json")

    # then a 409 that says why, in a form its client recognises
    assert response.status_code == 409
    lost_at = claim.released_at.isoformat()
    assert response.json() == {
        "message": f"Your claim on task {task.pk} was lost at {lost_at} because Switchyard heard nothing from "
        f"'claude-1' for {TTL} s; the task went back to ready. Claim it again.",
        "code": "lease_lost",
        "task": task.pk,
        "lost_at": lost_at,
        "ttl_seconds": TTL,
    }
    # and nothing changed: the task is ready, the claim expired, no event recorded
    task.refresh_from_db()
    assert (task.status, task.assignee_id) == (Task.Status.READY, None)
    claim.refresh_from_db()
    assert claim.outcome == TaskClaim.Outcome.EXPIRED
    assert Event.objects.count() == events_before


def test_lease_lost_also_when_another_agent_has_claimed_the_task_since(agent_client, agent, other_agent):
    task, _ = _reaped_holder_of(agent)
    task_claim(actor=Actor(agent=other_agent), agent=other_agent, task=task)

    response = agent_client.post(f"/api/v1/tasks/{task.pk}/complete/", {}, format="json")

    assert response.status_code == 409
    assert response.json()["code"] == "lease_lost"
    task.refresh_from_db()
    assert (task.status, task.assignee_id) == (Task.Status.IN_PROGRESS, other_agent.pk)


def test_a_task_never_held_is_still_a_plain_conflict(agent_client):
    task = TaskFactory(title="never mine")

    response = agent_client.post(f"/api/v1/tasks/{task.pk}/complete/", {}, format="json")

    assert response.status_code == 409
    assert "code" not in response.json()


def test_releasing_a_worktree_the_reaper_took_back_is_lease_lost(agent_client, agent):
    # given a worktree the reaper took from the silent agent
    worktree = WorktreeFactory()
    worktree_claim(actor=Actor(agent=agent), agent=agent, worktree=worktree)
    _last_heard(agent, TTL + 1)
    [reaped] = agents_reap_stale()
    assert reaped.worktrees == [worktree.pk]
    events_before = Event.objects.count()

    # when the agent releases it
    response = agent_client.post(f"/api/v1/worktrees/{worktree.pk}/release/", {}, format="json")

    # then 409 lease_lost, and nothing changed
    assert response.status_code == 409
    body = response.json()
    assert (body["code"], body["worktree"], body["reason"]) == ("lease_lost", worktree.pk, "holder claude-1 stale")
    worktree.refresh_from_db()
    assert worktree.holder_id is None
    assert Event.objects.count() == events_before


def test_a_worktree_lease_that_ran_out_is_lease_lost(agent_client, agent):
    worktree = WorktreeFactory(held=True, holder=agent)
    Worktree.objects.filter(pk=worktree.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))

    response = agent_client.post(f"/api/v1/worktrees/{worktree.pk}/release/", {}, format="json")

    assert response.status_code == 409
    assert response.json()["code"] == "lease_lost"
    worktree.refresh_from_db()
    assert worktree.holder_id == agent.pk


def test_events_keep_coming_after_a_reap(agent_client, agent, session):
    # The session is not the claim: a reaped agent's events are still stored (and revive it).
    _reaped_holder_of(agent)

    response = agent_client.post(f"/api/v1/sessions/{session.pk}/events/", {"type": "log"}, format="json")

    assert response.status_code == 201
    assert StreamEvent.objects.filter(session=session).count() == 1
    agent.refresh_from_db()
    assert agent.status == Agent.Status.ACTIVE


def test_the_schema_documents_lease_lost_on_the_claim_writes():
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)

    for path in (
        "/api/v1/tasks/{task_id}/complete/",
        "/api/v1/tasks/{task_id}/fail/",
        "/api/v1/tasks/{task_id}/release/",
        "/api/v1/worktrees/{worktree_id}/release/",
    ):
        conflict = schema["paths"][path]["post"]["responses"]["409"]["content"]["application/json"]["schema"]
        assert conflict == {"$ref": "#/components/schemas/LeaseLostOutput"}, path
    code = schema["components"]["schemas"]["LeaseLostOutput"]["properties"]["code"]
    [ref] = code["allOf"]
    assert schema["components"]["schemas"][ref["$ref"].rsplit("/", 1)[1]]["enum"] == ["lease_lost"]
