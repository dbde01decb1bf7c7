"""No run's task is taken by another agent (issue 24, §1), with real threads on real database
connections released together: 20 agents calling claim-next until nothing is left, while a runner
takes 20 queued runs and starts them. The runs' tasks are the best on the board, so a claim-next that
did not leave them to their runs would take them first. Runs on SQLite (IMMEDIATE transactions
serialise the writers) and on PostgreSQL (the pick's SKIP LOCKED and the claim's one statement)."""

import time
from collections import Counter

import pytest

from board.models import Task, TaskClaim
from board.services import task_claim_next
from config.actors import Actor
from config.api.errors import DomainError
from runners.dispatch import runs_dispatch
from runners.models import Run, Runner
from runners.run_lifecycle import run_report
from runners.services import run_queue, runner_key_create
from tests.factories import AgentFactory, TaskFactory, UserFactory
from tests.threads import run_together

pytestmark = [pytest.mark.concurrency, pytest.mark.django_db(transaction=True)]

RUNS = 20
CLAIMERS = 20
PLAIN = 20


def test_claim_next_writers_never_take_a_task_whose_run_is_queued_or_starting():
    # given 20 queued runs on the best tasks, 20 plain tasks below them, a runner and 20 agents
    person = Actor(user=UserFactory(is_staff=True))
    runs = [
        run_queue(actor=person, task=TaskFactory(title=f"Run {n}", priority="P0"), provider="demo") for n in range(RUNS)
    ]
    plain = [TaskFactory(title=f"Plain {n}", priority="P3").pk for n in range(PLAIN)]
    runner, issued, _ = runner_key_create(name="r1", capacity=RUNS)
    Runner.objects.filter(pk=runner.pk).update(providers=["demo"], status=Runner.Status.ONLINE)
    runner.refresh_from_db()
    runner_actor = Actor(agent=runner.agent, api_key=issued.api_key)
    claimers = [AgentFactory(slug=f"claimer-{n:02d}") for n in range(CLAIMERS)]
    claimed: dict[str, list[int]] = {agent.slug: [] for agent in claimers}
    refused_starts: list[str] = []

    # when the agents claim the next task until there is none, while the runner takes and starts the runs
    def work(who):
        if who == "runner":
            started, deadline = set(), time.monotonic() + 120
            while len(started) + len(refused_starts) < RUNS and time.monotonic() < deadline:
                for run in runs_dispatch(actor=runner_actor, runner=runner):
                    try:
                        run_report(actor=runner_actor, run=run, attempt=run.attempt, status="starting")
                        started.add(run.pk)
                    except DomainError as exc:
                        refused_starts.append(exc.message)
            return
        actor = Actor(agent=who)
        while (task := task_claim_next(actor=actor, agent=who)) is not None:
            claimed[who.slug].append(task.pk)

    errors = run_together(work, ["runner", *claimers])

    # then nothing went wrong, and no run's start was refused
    assert errors == []
    assert refused_starts == []
    # every run started on its own task, which its run's agent holds
    rows = list(Run.objects.filter(pk__in=[r.pk for r in runs]).select_related("task", "agent"))
    assert Counter(run.status for run in rows) == {"starting": RUNS}
    assert all((run.task.status, run.task.assignee_id) == ("in_progress", run.agent_id) for run in rows)
    assert {run.agent.slug for run in rows} == {"demo-at-r1"}
    # and the agents took exactly the plain tasks, each once, none of the runs'
    taken = [task_id for ids in claimed.values() for task_id in ids]
    assert sorted(taken) == sorted(plain)
    assert not set(taken) & {run.task_id for run in rows}
    assert TaskClaim.objects.filter(outcome=TaskClaim.Outcome.OPEN).count() == RUNS + PLAIN
    assert Task.objects.filter(status="ready").count() == 0
