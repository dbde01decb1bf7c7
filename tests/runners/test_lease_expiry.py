"""Lease expiry (runners/leases.py): runs of a runner gone quiet go back to the queue or are lost and
re-queued, the old attempt is fenced out, and the runner goes offline."""

from datetime import timedelta
from unittest import mock

import pytest
from django.utils import timezone

from board.models import Task, TaskClaim
from config.api.errors import LEASE_LOST
from config.schedules import schedules
from ledger.models import Event
from runners import leases
from runners.leases import runs_expire_leases
from runners.models import Run, Runner
from runners.tasks import runs_expire_leases_task
from sessions_app.models import AgentApiKey
from tests.runners.runner_clients import client_with_key, next_runs, post_log, report, take_and_start
from workspaces.models import Repository, Worktree

pytestmark = pytest.mark.django_db
LATER = timedelta(seconds=61 + 5)  # past the lease (60 s) and its margin (RUNNER_LEASE_MARGIN_SECONDS)


def test_an_assigned_run_whose_lease_lapsed_goes_back_to_the_queue_fenced(runner_client, queue_run):
    run = queue_run()
    next_runs(runner_client)

    expired = runs_expire_leases(now=timezone.now() + LATER)

    stored = Run.objects.get(pk=run.pk)
    assert expired.requeued == [run.pk]
    assert (stored.status, stored.attempt, stored.runner_id, stored.agent_id, stored.lease_expires_at) == (
        "queued",
        2,
        None,
        None,
        None,
    )
    # the runner that had it hears lease_lost
    response = report(runner_client, run.pk, "starting", attempt=1)
    assert (response.status_code, response.json()["code"]) == (409, LEASE_LOST)


def test_a_started_run_whose_lease_lapsed_is_lost_and_queued_again_to_resume(runner_client, queue_run, settings):
    # given a running run with a session, a claim and a per-run key
    run = queue_run()
    started = take_and_start(runner_client, run)
    report(runner_client, run.pk, "running", pid=7)

    # when its runner goes quiet past the lease
    expired = runs_expire_leases(now=timezone.now() + LATER)

    # then the run is lost, its session failed, the task given back, the key revoked
    lost = Run.objects.select_related("session", "task").get(pk=run.pk)
    assert expired.lost == [run.pk]
    assert (lost.status, lost.ended_at is not None, lost.session.status) == ("lost", True, "failed")
    assert (lost.task.status, lost.task.assignee_id) == ("ready", None)
    assert TaskClaim.objects.get(task=lost.task).outcome == "released"
    assert AgentApiKey.objects.get(session=lost.session).revoked_at is not None
    assert client_with_key(started["agent_key"]).get(f"/api/v1/sessions/{lost.session_id}/").status_code == 401
    assert Event.objects.filter(name="run.lost", subject_id=str(run.pk)).count() == 1
    # and a new run resumes it
    again = Run.objects.get(pk=expired.resumed_by[run.pk])
    assert (again.status, again.task_id, again.provider, again.prompt, again.resumes_id, again.attempt) == (
        "queued",
        run.task_id,
        "demo",
        run.prompt,
        run.pk,
        1,
    )
    # and whatever the old runner sends about the lost run is refused
    for response in (
        report(runner_client, run.pk, "succeeded", attempt=1, exit_code=0),
        post_log(runner_client, run.pk, b"late", offset=0, attempt=1),
    ):
        assert (response.status_code, response.json()["code"]) == (409, LEASE_LOST)
    assert Run.objects.get(pk=run.pk).status == "lost"


def test_the_resuming_run_starts_with_the_lost_sessions_packet(runner_client, other_runner_client, queue_run):
    run = queue_run()
    first = take_and_start(runner_client, run)
    expired = runs_expire_leases(now=timezone.now() + LATER)

    resumed = Run.objects.get(pk=expired.resumed_by[run.pk])
    handed = next_runs(other_runner_client).json()["runs"]
    started = report(other_runner_client, resumed.pk, "starting").json()

    assert (handed[0]["kind"], handed[0]["resumes"]["id"], handed[0]["resumes"]["session"]) == (
        "work",
        run.pk,
        first["session"],
    )
    assert handed[0]["resumes"]["runner"] == "build-1"  # where the lost one ran
    assert started["resume"]["session"]["id"] == first["session"]
    assert Task.objects.get(pk=run.task_id).assignee.slug == "demo-at-build-2"


def test_with_requeue_off_a_lost_run_is_only_lost(runner_client, queue_run, settings):
    settings.RUNNER_REQUEUE_LOST = False
    run = queue_run()
    take_and_start(runner_client, run)

    expired = runs_expire_leases(now=timezone.now() + LATER)

    assert (expired.lost, expired.resumed_by) == ([run.pk], {})
    assert list(Run.objects.values_list("status", flat=True)) == ["lost"]


def test_a_heartbeat_keeps_the_lease(runner_client, queue_run):
    run = queue_run()
    take_and_start(runner_client, run)

    assert runs_expire_leases(now=timezone.now() + timedelta(seconds=30)).lost == []
    runner_client.post("/api/v1/runners/me/heartbeat/", {}, format="json")
    assert runs_expire_leases(now=timezone.now() + timedelta(seconds=50)).lost == []
    assert Run.objects.get(pk=run.pk).status == "starting"


def test_expiry_is_idempotent(runner_client, queue_run):
    run = queue_run()
    take_and_start(runner_client, run)
    later = timezone.now() + LATER
    runs_expire_leases(now=later)
    state = list(Run.objects.order_by("pk").values()), Event.objects.count()

    again = runs_expire_leases(now=later)

    assert (again.requeued, again.lost) == ([], [])
    assert (list(Run.objects.order_by("pk").values()), Event.objects.count()) == state


def test_runners_unseen_for_the_lease_go_offline(runner_client, other_runner_client):
    runner_client.post("/api/v1/runners/me/heartbeat/", {}, format="json")
    Runner.objects.filter(pk=other_runner_client.runner.pk).update(last_seen_at=timezone.now() - timedelta(seconds=10))

    expired = runs_expire_leases(now=timezone.now() + timedelta(seconds=55))

    assert expired.offline == ["build-2"]
    statuses = dict(Runner.objects.values_list("name", "status"))
    assert statuses == {"build-1": "online", "build-2": "offline"}


def test_the_task_runs_it_and_beat_schedules_it_every_15_s(runner_client, queue_run):
    queue_run()
    next_runs(runner_client)
    Run.objects.update(lease_expires_at=timezone.now() - timedelta(seconds=1))

    assert runs_expire_leases_task.run() == {"requeued": 1, "lost": 0, "offline": 0}
    schedule = {s.task: s for s in schedules()}["runners.tasks.runs_expire_leases_task"]
    assert schedule.every_seconds == 15


def _worktree_of(task: Task) -> Worktree:
    """The worktree a runner makes for ``task`` (``task-<id>`` beside the clone: runner/workdir.py)."""
    repository = Repository.objects.create(name="demo-shop", path="/srv/src/demo-shop")
    Task.objects.filter(pk=task.pk).update(repository=repository)
    return Worktree.objects.create(
        repository=repository,
        type="task",
        name=str(task.pk),
        branch=f"task-{task.pk}",
        real_path=f"/srv/src/task-{task.pk}",
    )


def _lost_with_its_worktree_claimed(runner_client, queue_run) -> tuple[Run, Worktree]:
    """A started run whose agent claimed the task's worktree with the run's key, its lease lapsed."""
    run = queue_run()
    tree = _worktree_of(run.task)
    started = take_and_start(runner_client, run)
    claimed = client_with_key(started["agent_key"]).post(f"/api/v1/worktrees/{tree.pk}/claim/", {}, format="json")
    assert claimed.status_code == 200, claimed.json()
    assert Worktree.objects.get(pk=tree.pk).holder.slug == "demo-at-build-1"
    return run, tree


def test_a_lost_run_frees_its_task_and_worktree_for_the_attempt_that_resumes_it(
    runner_client, other_runner_client, queue_run
):
    run, tree = _lost_with_its_worktree_claimed(runner_client, queue_run)

    expired = runs_expire_leases(now=timezone.now() + LATER)

    # then the claims the dead attempt held are gone: the task's and the worktree's
    assert expired.lost == [run.pk]
    task = Task.objects.get(pk=run.task_id)
    assert (task.status, task.assignee_id) == ("ready", None)
    freed = Worktree.objects.get(pk=tree.pk)
    assert (freed.holder_id, freed.lease_expires_at) == (None, None)
    released = Event.objects.get(name="worktree.released", subject_id=str(tree.pk))
    assert released.payload["reason"] == f"run {run.pk} lost"
    # and the attempt that resumes it, on the other runner, takes both at once
    again = Run.objects.get(pk=expired.resumed_by[run.pk])
    assert [r["id"] for r in next_runs(other_runner_client).json()["runs"]] == [again.pk]
    started = report(other_runner_client, again.pk, "starting")
    assert started.status_code == 200, started.json()
    claimed = client_with_key(started.json()["agent_key"]).post(
        f"/api/v1/worktrees/{tree.pk}/claim/", {}, format="json"
    )
    assert (claimed.status_code, claimed.json()["outcome"]) == (200, "granted"), claimed.json()
    assert Worktree.objects.get(pk=tree.pk).holder.slug == "demo-at-build-2"


def test_a_lost_runs_claims_are_freed_in_the_transaction_that_marks_it_lost(runner_client, queue_run, monkeypatch):
    run, tree = _lost_with_its_worktree_claimed(runner_client, queue_run)
    # The last step of the expiry fails: everything it did before is rolled back with it.
    monkeypatch.setattr(leases, "run_requeue_lost", mock.Mock(side_effect=RuntimeError("broker gone")))

    with pytest.raises(RuntimeError, match="broker gone"):
        runs_expire_leases(now=timezone.now() + LATER)

    # nothing moved: not lost, the task and the worktree still held by the run's agent
    stored = Run.objects.select_related("task", "agent").get(pk=run.pk)
    assert (stored.status, stored.task.status, stored.task.assignee_id) == ("starting", "in_progress", stored.agent_id)
    assert Worktree.objects.get(pk=tree.pk).holder_id == stored.agent_id

    # and with the step back, one pass does all of it
    monkeypatch.undo()
    assert runs_expire_leases(now=timezone.now() + LATER).lost == [run.pk]
    assert Run.objects.get(pk=run.pk).status == "lost"
    assert (Task.objects.get(pk=run.task_id).status, Worktree.objects.get(pk=tree.pk).holder_id) == ("ready", None)
