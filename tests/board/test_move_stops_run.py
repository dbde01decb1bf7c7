"""A card dragged out of In progress asks its task's active run to stop (runners/card_moves.py),
in the same transaction as the move; other moves leave runs alone."""

from unittest import mock

import pytest

from board import services
from board.models import Task, TaskClaim
from config.actors import Actor
from config.api.errors import DomainError
from runners import card_moves
from runners.card_moves import task_move_stopping_runs
from runners.models import Run
from runners.services import runner_key_create
from tests.board.board_helpers import product_owner
from tests.factories import TaskFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def person(db):
    return product_owner()


@pytest.fixture
def po_client(client, person):
    client.force_login(person)
    return client


@pytest.fixture
def runner(db):
    return runner_key_create(name="build-1", labels=[], capacity=2)[0]


def _working(agent, runner, *, run_status=Run.Status.RUNNING) -> tuple[Task, Run]:
    """A task an agent holds (in progress) with a run a runner holds."""
    task = TaskFactory(title="Fix the login bug")
    task, _ = services.task_claim(actor=Actor(agent=agent), agent=agent, task=task)
    run = Run.objects.create(task=task, provider="demo", status=run_status, runner=runner, agent=agent)
    return task, run


def test_dragging_a_running_card_to_ready_asks_its_run_to_stop(po_client, agent, runner):
    task, run = _working(agent, runner)

    response = po_client.post(f"/tasks/{task.pk}/move/", {"status": "ready"})

    assert response.status_code == 200
    run.refresh_from_db()
    task.refresh_from_db()
    assert run.cancel_requested_at is not None
    assert run.status == Run.Status.RUNNING  # its runner stops the agent and reports cancelled
    assert (task.status, task.assignee_id) == (Task.Status.READY, None)  # where the person put it
    assert not TaskClaim.objects.filter(task=task, released_at__isnull=True).exists()


@pytest.mark.parametrize("to", ["review", "done", "failed", "blocked", "backlog"])
def test_every_column_out_of_in_progress_stops_the_run(person, agent, runner, to):
    task, run = _working(agent, runner)

    task_move_stopping_runs(actor=Actor(user=person), task_id=task.pk, status=to)

    run.refresh_from_db()
    assert run.cancel_requested_at is not None
    assert Task.objects.get(pk=task.pk).status == to


def test_reordering_inside_in_progress_leaves_the_run_alone(person, agent, runner):
    task, run = _working(agent, runner)

    task_move_stopping_runs(actor=Actor(user=person), task_id=task.pk, status="in_progress")

    run.refresh_from_db()
    assert run.cancel_requested_at is None


def test_a_card_without_a_run_moves_as_before(person, agent):
    task = TaskFactory()
    task, _ = services.task_claim(actor=Actor(agent=agent), agent=agent, task=task)

    result = task_move_stopping_runs(actor=Actor(user=person), task_id=task.pk, status="ready")

    assert result.previous_status == Task.Status.IN_PROGRESS
    assert Task.objects.get(pk=task.pk).status == Task.Status.READY


def test_an_ended_run_is_not_touched(person, agent, runner):
    task, run = _working(agent, runner)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.FAILED, ended_at=run.created_at)

    task_move_stopping_runs(actor=Actor(user=person), task_id=task.pk, status="ready")

    run.refresh_from_db()
    assert (run.status, run.cancel_requested_at) == (Run.Status.FAILED, None)


def test_a_refused_move_asks_nothing(po_client, agent, runner):
    task, run = _working(agent, runner)

    response = po_client.post(f"/tasks/{task.pk}/move/", {"status": "ready", "after_id": "999999"})

    assert response.status_code == 409
    run.refresh_from_db()
    assert run.cancel_requested_at is None
    assert Task.objects.get(pk=task.pk).status == Task.Status.IN_PROGRESS


def test_move_and_cancel_are_one_transaction(person, agent, runner):
    task, run = _working(agent, runner)

    with (
        mock.patch.object(card_moves, "run_stop", side_effect=DomainError("boom", code="invalid")),
        pytest.raises(DomainError),
    ):
        task_move_stopping_runs(actor=Actor(user=person), task_id=task.pk, status="ready")

    task.refresh_from_db()
    assert (task.status, task.assignee_id) == (Task.Status.IN_PROGRESS, agent.pk)
    assert TaskClaim.objects.filter(task=task, released_at__isnull=True).exists()
