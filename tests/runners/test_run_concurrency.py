"""Runs under real concurrency: threads with their own database connections, released together.

On PostgreSQL the unique partial index and SELECT ... FOR UPDATE decide; on SQLite the
IMMEDIATE transactions serialise the writers. Either way exactly one of the racers wins.
"""

import pytest

from config.actors import SYSTEM, Actor
from config.api.errors import DomainError
from ledger.models import Event
from runners.models import Run
from runners.services import run_queue, run_transition, runner_key_create
from tests.factories import TaskFactory, UserFactory
from tests.threads import run_together

pytestmark = [pytest.mark.concurrency, pytest.mark.django_db(transaction=True)]
THREADS = 16


@pytest.mark.parametrize("round_", range(3))
def test_racing_to_queue_a_run_of_one_task_makes_exactly_one(round_):
    # given one task and 16 people pressing Run at once
    task = TaskFactory(title="The only task")
    people = [Actor(user=UserFactory(username=f"po-{n}", is_staff=True)) for n in range(THREADS)]
    won: list[int] = []
    refused: list[DomainError] = []

    def queue(person):
        try:
            won.append(run_queue(actor=person, task=task, provider="claude").pk)
        except DomainError as exc:
            refused.append(exc)

    # when they all queue
    errors = run_together(queue, people)

    # then exactly one run exists and the other fifteen were told the task already has it
    assert errors == []
    assert len(won) == 1
    assert list(Run.objects.values_list("pk", "status")) == [(won[0], "queued")]
    assert len(refused) == THREADS - 1
    assert {(exc.code, exc.message) for exc in refused} == {
        ("conflict", f"Task {task.pk} already has an active run ({won[0]}); cancel it first.")
    }
    assert list(Event.objects.values_list("name", "subject_id")) == [("run.queued", str(won[0]))]


@pytest.mark.parametrize("round_", range(3))
def test_racing_runners_for_one_queued_run_hand_it_to_exactly_one(round_):
    # given one queued run and 16 runners that each try to take it
    run = run_queue(actor=Actor(user=UserFactory(is_staff=True)), task=TaskFactory(), provider="claude")
    runners = [runner_key_create(name=f"r{round_}-{n:02d}")[0] for n in range(THREADS)]
    won: list[str] = []
    refused: list[DomainError] = []

    def assign(runner):
        mine = Run.objects.get(pk=run.pk)  # each thread its own instance, as a request would have
        try:
            run_transition(actor=Actor(agent=runner.agent), run=mine, to=Run.Status.ASSIGNED, runner=runner)
        except DomainError as exc:
            refused.append(exc)
        else:
            won.append(runner.name)

    # when they all assign it to themselves at once
    errors = run_together(assign, runners)

    # then one runner holds it and the rest were refused by the state machine
    assert errors == []
    assert len(won) == 1
    stored = Run.objects.select_related("runner").get(pk=run.pk)
    assert (stored.status, stored.runner.name, stored.attempt) == ("assigned", won[0], 1)
    assert {(exc.code, exc.message) for exc in refused} == {
        ("conflict", f"Run {run.pk} cannot go from assigned to assigned.")
    }
    assert len(refused) == THREADS - 1


@pytest.mark.parametrize("round_", range(5))
def test_a_fenced_runner_racing_a_requeue_never_writes_after_it(round_):
    # given a run held by a runner at attempt 1
    run = run_queue(actor=Actor(user=UserFactory(is_staff=True)), task=TaskFactory(), provider="claude")
    runner, issued, _ = runner_key_create(name=f"fence-{round_}")
    run = run_transition(actor=SYSTEM, run=run, to=Run.Status.ASSIGNED, runner=runner)
    outcomes: dict[str, str] = {}

    # when the runner reports "starting" at the moment Switchyard hands the run back
    def act(who):
        mine = Run.objects.get(pk=run.pk)
        try:
            if who == "runner":
                run_transition(
                    actor=Actor(agent=runner.agent, api_key=issued.api_key),
                    run=mine,
                    to=Run.Status.STARTING,
                    attempt=1,
                )
            else:
                run_transition(actor=SYSTEM, run=mine, to=Run.Status.QUEUED)
        except DomainError as exc:
            outcomes[who] = exc.extra.get("code", exc.code)
        else:
            outcomes[who] = "ok"

    errors = run_together(act, ["runner", "system"])

    # then exactly one of them took effect, and the row is what the winner left
    assert errors == []
    stored = Run.objects.get(pk=run.pk)
    if outcomes["runner"] == "ok":
        # the runner came first: starting is not handed back (starting -> queued is illegal)
        assert outcomes["system"] == "conflict"
        assert (stored.status, stored.attempt, stored.runner_id) == ("starting", 1, runner.pk)
    else:
        # the requeue came first: attempt 1 is fenced out
        assert (outcomes, stored.status, stored.attempt, stored.runner_id) == (
            {"runner": "lease_lost", "system": "ok"},
            "queued",
            2,
            None,
        )
