"""A task with an active run is its run's (issue 24, §1): claim-next leaves it alone and a claim by id
is a 409 naming the run, from the moment the run is queued until it ends; only the run's own agent
claims it, when the run starts. And a run whose start is refused because its task moved on ends
with that reason instead of staying active forever."""

import pytest

from board.models import Task, TaskClaim
from board.services import task_claim
from config.actors import Actor
from ledger.models import Event
from runners.models import Run
from runners.services import run_cancel, run_queue
from sessions_app.keys import api_key_create
from sessions_app.models import AgentSession
from tests.factories import AgentFactory, TaskFactory
from tests.runners.runner_clients import client_with_key, next_runs, report

pytestmark = pytest.mark.django_db


@pytest.fixture
def someone():
    """Another agent, working the board with its own key."""
    agent = AgentFactory(slug="codex-7")
    return client_with_key(api_key_create(agent=agent, scopes=["agent"]).key)


def _claim_next(client):
    return client.post("/api/v1/tasks/claim-next/", {}, format="json")


def _claim(client, task_id: int):
    return client.post(f"/api/v1/tasks/{task_id}/claim/", {}, format="json")


def test_claim_next_leaves_a_task_with_a_queued_run_to_its_run(person, someone):
    # given the best ready task has a queued run, and a worse one has none
    run = run_queue(actor=person, task=TaskFactory(title="Run me", priority="P0"), provider="demo")
    plain = TaskFactory(title="Anyone", priority="P3")

    # when another agent claims the next task, twice
    first, second = _claim_next(someone), _claim_next(someone)

    # then it gets the one without a run, then nothing; the run's task stays ready and unheld
    assert (first.status_code, first.json()["id"]) == (200, plain.pk)
    assert second.status_code == 204
    task = Task.objects.get(pk=run.task_id)
    assert (task.status, task.assignee_id) == ("ready", None)
    assert not TaskClaim.objects.filter(task=task).exists()


@pytest.mark.parametrize("handed_out", [False, True])
def test_a_claim_by_id_of_a_task_with_an_active_run_is_a_409_naming_the_run(person, someone, runner_client, handed_out):
    run = run_queue(actor=person, task=TaskFactory(), provider="demo")
    if handed_out:
        next_runs(runner_client)
    before = list(Task.objects.values()), TaskClaim.objects.count(), Event.objects.count()

    response = _claim(someone, run.task_id)

    assert response.status_code == 409, response.json()
    detail = response.json()["message"]
    status = "assigned on runner build-1" if handed_out else "queued"
    assert f"run {run.pk} ({status})" in detail, detail
    assert (list(Task.objects.values()), TaskClaim.objects.count(), Event.objects.count()) == before


def test_the_runs_own_start_claims_its_task_and_an_ended_run_frees_it_for_anyone(person, someone, runner_client):
    run = run_queue(actor=person, task=TaskFactory(), provider="demo")
    next_runs(runner_client)

    started = report(runner_client, run.pk, "starting")

    assert started.status_code == 200, started.json()
    assert Task.objects.get(pk=run.task_id).assignee.slug == "demo-at-build-1"
    # ended (failed), the task is failed; put back to ready, anyone may claim it again
    report(runner_client, run.pk, "failed", error="boom")
    Task.objects.filter(pk=run.task_id).update(status=Task.Status.READY, assignee=None, session=None)
    assert (_claim(someone, run.task_id).status_code, _claim_next(someone).status_code) == (200, 204)


@pytest.mark.parametrize("moved_to", ["done", "in_progress"])
def test_a_run_whose_task_moved_on_before_it_started_ends_failed_with_why(person, runner_client, moved_to):
    # given a handed-out run whose task someone else finished (or holds) meanwhile
    run = run_queue(actor=person, task=TaskFactory(), provider="demo")
    next_runs(runner_client)
    other = AgentFactory(slug="human-ish")
    Task.objects.filter(pk=run.task_id).update(status=moved_to, assignee=other if moved_to == "in_progress" else None)

    # when its runner reports it starting
    response = report(runner_client, run.pk, "starting")

    # then the start is refused, and the run ended failed with the reason: no longer active
    assert response.status_code == 409, response.json()
    body = response.json()
    assert (body["task_status"], body["run"], body["run_status"]) == (moved_to, run.pk, "failed")
    assert f"Task {run.task_id} is {moved_to}" in body["message"]
    ended = Run.objects.get(pk=run.pk)
    assert (ended.status, ended.ended_at is not None) == ("failed", True)
    assert ended.error.startswith(f"Could not start: Task {run.task_id} is {moved_to}")
    assert [e.payload["status"] for e in Event.objects.filter(name="run.finished", subject_id=str(run.pk))] == [
        "failed"
    ]
    # and nothing of the task or of a session was touched
    task = Task.objects.get(pk=run.task_id)
    assert (task.status, task.assignee_id) == (moved_to, other.pk if moved_to == "in_progress" else None)
    assert not AgentSession.objects.exists()
    # the runner's follow-up report of the failure is a retry of the end: 200, nothing changes
    again = report(runner_client, run.pk, "failed", error="409 from the server")
    assert again.status_code == 200
    assert Run.objects.get(pk=run.pk).error == ended.error
    # and a new run can be queued on the task
    Task.objects.filter(pk=run.task_id).update(status="ready", assignee=None)
    assert run_queue(actor=person, task=Task.objects.get(pk=run.task_id), provider="demo").status == "queued"


def test_a_run_asked_to_stop_whose_task_moved_on_ends_cancelled(person, runner_client):
    run = run_queue(actor=person, task=TaskFactory(), provider="demo")
    next_runs(runner_client)
    run_cancel(actor=person, run=run)
    Task.objects.filter(pk=run.task_id).update(status="backlog")

    response = report(runner_client, run.pk, "starting")

    assert (response.status_code, response.json()["run_status"]) == (409, "cancelled")
    assert Run.objects.get(pk=run.pk).status == "cancelled"


def test_only_the_runs_own_agent_may_claim_its_task_once_it_is_handed_out(person, runner_client):
    """Not another agent, even one named like it."""
    run = run_queue(actor=person, task=TaskFactory(), provider="demo")
    next_runs(runner_client)
    run.refresh_from_db()
    lookalike = AgentFactory(slug="demo-at-build-9")

    refused = _claim(client_with_key(api_key_create(agent=lookalike, scopes=["agent"]).key), run.task_id)
    assert refused.status_code == 409

    task, claimed = _claim_as(run.agent, run.task_id)
    assert claimed and task.assignee_id == run.agent_id


def _claim_as(agent, task_id: int):
    return task_claim(actor=Actor(agent=agent), agent=agent, task=Task.objects.get(pk=task_id))
