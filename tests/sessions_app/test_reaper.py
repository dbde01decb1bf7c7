"""The heartbeat reaper: stale agents go to error and give back their tasks and worktrees."""

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from board.models import Task, TaskClaim
from board.services import task_claim
from composition.reaper import agents_reap_stale
from composition.tasks import agents_reap_stale_task
from config.actors import SYSTEM, Actor
from ledger.models import Event
from sessions_app.models import Agent
from sessions_app.services import agent_heartbeat
from tests.admin.factories import WorktreeFactory
from tests.factories import AgentFactory, TaskFactory
from workspaces.models import Worktree
from workspaces.worktrees.claims import worktree_claim

TTL = 300


@pytest.fixture(autouse=True)
def _ttl(settings):
    settings.HEARTBEAT_TTL_SECONDS = TTL


def _agent(slug, *, silent_for=None, status=Agent.Status.ACTIVE) -> Agent:
    heartbeat = None if silent_for is None else timezone.now() - timedelta(seconds=silent_for)
    return AgentFactory(slug=slug, status=status, last_heartbeat_at=heartbeat)


def _claimed_task(agent, title) -> Task:
    task, _ = task_claim(actor=Actor(agent=agent), agent=agent, task=TaskFactory(title=title))
    return task


def _events(name) -> list[Event]:
    return list(Event.objects.filter(name=name).order_by("id"))


@pytest.mark.django_db
def test_a_stale_agent_goes_to_error_and_gives_back_its_tasks_and_worktrees():
    # given a silent agent holding two tasks and a worktree another agent waits for
    stale = _agent("gone", silent_for=TTL + 1)
    waiter = _agent("waiter", silent_for=0)
    first, second = _claimed_task(stale, "one"), _claimed_task(stale, "two")
    worktree = WorktreeFactory()
    worktree_claim(actor=Actor(agent=stale), agent=stale, worktree=worktree)
    worktree_claim(actor=Actor(agent=waiter), agent=waiter, worktree=worktree, wait=True)
    # and waiting itself in another worktree's queue
    other = WorktreeFactory()
    worktree_claim(actor=Actor(agent=waiter), agent=waiter, worktree=other)
    worktree_claim(actor=Actor(agent=stale), agent=stale, worktree=other, wait=True)

    # when
    reaped = agents_reap_stale()

    # then the agent is in error, with one agent.stale event
    assert [(r.slug, r.tasks, r.worktrees) for r in reaped] == [("gone", [first.pk, second.pk], [worktree.pk])]
    stale.refresh_from_db()
    assert stale.status == Agent.Status.ERROR
    [event] = _events("agent.stale")
    assert (event.subject_type, event.subject_id, event.actor) == ("agent", "gone", "system")
    assert event.payload == {
        "last_heartbeat_at": stale.last_heartbeat_at.isoformat(),
        "ttl_seconds": TTL,
        "tasks_returned": [first.pk, second.pk],
        "worktrees_returned": [worktree.pk],
    }
    # its tasks are ready again, unassigned, their claims expired
    for task in (first, second):
        task.refresh_from_db()
        assert (task.status, task.assignee_id, task.session_id) == (Task.Status.READY, None, None)
        claim = task.claims.get()
        assert claim.outcome == TaskClaim.Outcome.EXPIRED and claim.released_at is not None
    assert [(e.subject_id, e.actor) for e in _events("task.released")] == [
        (str(first.pk), "system"),
        (str(second.pk), "system"),
    ]
    # its worktree went to the head of the queue
    worktree.refresh_from_db()
    assert worktree.holder_id == waiter.pk and worktree.lease_expires_at > timezone.now()
    assert list(worktree.queue.values_list("agent__slug", "status")) == [("waiter", "granted")]
    released = [e for e in _events("worktree.released") if e.subject_id == str(worktree.pk)]
    assert [(e.actor, e.payload["holder"], e.payload["reason"]) for e in released] == [
        ("system", stale.pk, "holder gone stale")
    ]
    # and it no longer waits for the other one
    assert list(other.queue.values_list("agent__slug", "status")) == [("gone", "cancelled")]
    assert Worktree.objects.get(pk=other.pk).holder_id == waiter.pk


@pytest.mark.django_db
def test_only_active_agents_past_the_ttl_are_reaped():
    # given
    _agent("stale", silent_for=TTL + 5)
    _agent("fresh", silent_for=TTL - 5)
    _agent("never-beat")
    _agent("paused", silent_for=TTL * 10, status=Agent.Status.PAUSED)
    _agent("completed", silent_for=TTL * 10, status=Agent.Status.COMPLETED)
    _agent("broken", silent_for=TTL * 10, status=Agent.Status.ERROR)
    before = dict(Agent.objects.values_list("slug", "status"))

    # when
    reaped = agents_reap_stale()

    # then
    assert [r.slug for r in reaped] == ["stale"]
    assert dict(Agent.objects.values_list("slug", "status")) == {**before, "stale": Agent.Status.ERROR}
    assert [e.subject_id for e in _events("agent.stale")] == ["stale"]


@pytest.mark.django_db
def test_running_it_again_changes_nothing_and_emits_nothing():
    stale = _agent("gone", silent_for=TTL + 1)
    task = _claimed_task(stale, "one")
    assert agents_reap_stale_task() == 1
    events = Event.objects.count()
    state = (list(Agent.objects.values()), list(Task.objects.values()), list(TaskClaim.objects.values()))

    assert agents_reap_stale_task() == 0

    assert Event.objects.count() == events
    assert (list(Agent.objects.values()), list(Task.objects.values()), list(TaskClaim.objects.values())) == state
    task.refresh_from_db()
    assert task.status == Task.Status.READY


@pytest.mark.django_db
def test_an_agent_that_beats_again_comes_back_and_its_returned_work_stays_returned():
    stale = _agent("gone", silent_for=TTL + 1)
    task = _claimed_task(stale, "one")
    agents_reap_stale()

    agent_heartbeat(agent=stale)

    stale.refresh_from_db()
    task.refresh_from_db()
    assert stale.status == Agent.Status.ACTIVE
    assert (task.status, task.assignee_id) == (Task.Status.READY, None)


@pytest.mark.django_db
def test_the_system_actor_may_end_any_agents_claim_and_requests_may_not():
    agent = _agent("someone", silent_for=0)

    assert SYSTEM.owns(agent.pk)
    assert not Actor().owns(agent.pk)
    assert not Actor(agent=_agent("other", silent_for=0)).owns(agent.pk)
    assert SYSTEM.label == "system" and not SYSTEM.is_staff and not SYSTEM.can_orchestrate


@pytest.mark.concurrency
@pytest.mark.django_db(transaction=True)
def test_two_reapers_at_once_reap_each_agent_once():
    # given
    stale = [_agent(f"gone-{n}", silent_for=TTL + 1) for n in range(5)]
    for agent in stale:
        _claimed_task(agent, f"task of {agent.slug}")
    results, errors, barrier = [], [], threading.Barrier(4)

    def reaper():
        try:
            barrier.wait(timeout=30)
            results.append(agents_reap_stale())
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    # when
    threads = [threading.Thread(target=reaper) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    # then every agent was reaped by exactly one of them
    assert errors == []
    assert sorted(r.slug for batch in results for r in batch) == sorted(a.slug for a in stale)
    assert sorted(e.subject_id for e in _events("agent.stale")) == sorted(a.slug for a in stale)
    assert len(_events("task.released")) == 5
    assert set(TaskClaim.objects.values_list("outcome", flat=True)) == {TaskClaim.Outcome.EXPIRED}
    assert set(Task.objects.values_list("status", flat=True)) == {Task.Status.READY}


@pytest.mark.django_db
def test_one_agent_that_cannot_be_reaped_does_not_block_the_others(monkeypatch):
    _agent("a-broken", silent_for=TTL + 10)
    _agent("b-fine", silent_for=TTL + 1)
    real = __import__("composition.reaper", fromlist=["_tasks_expire"])._tasks_expire

    def fail_for_broken(*, agent):
        if agent.slug == "a-broken":
            raise RuntimeError("boom")
        return real(agent=agent)

    monkeypatch.setattr("composition.reaper._tasks_expire", fail_for_broken)

    reaped = agents_reap_stale()

    assert [r.slug for r in reaped] == ["b-fine"]
    assert dict(Agent.objects.values_list("slug", "status")) == {"a-broken": "active", "b-fine": "error"}
    assert [e.subject_id for e in _events("agent.stale")] == ["b-fine"]
