"""One holder at a time (SPEC §7), with real threads on real database connections.

Each thread gets its own connection from Django; a Barrier releases them together so
the claims really overlap. Runs on SQLite (IMMEDIATE transactions serialise writers)
and on PostgreSQL (SELECT ... FOR UPDATE SKIP LOCKED plus the conditional UPDATE).
"""

from collections import Counter

import pytest

from board import services
from board.models import Task, TaskClaim
from config.actors import Actor
from config.api.errors import DomainError
from ledger.models import Event
from tests.factories import AgentFactory
from tests.threads import run_together

pytestmark = [pytest.mark.concurrency, pytest.mark.django_db(transaction=True)]

THREADS = 16
TASKS = 500


def test_every_task_is_claimed_exactly_once_by_racing_agents():
    # given 500 ready tasks and 16 agents
    agents = [AgentFactory(slug=f"racer-{n:02d}") for n in range(THREADS)]
    Task.objects.bulk_create(
        Task(title=f"Task {n}", status=Task.Status.READY, priority=f"P{n % 4}", rank=(n + 1) * 1024)
        for n in range(TASKS)
    )
    claimed: dict[str, list[int]] = {agent.slug: [] for agent in agents}

    # when each agent claims the next task until there is none, all at once
    def claim_until_empty(agent):
        actor = Actor(agent=agent)
        while (task := services.task_claim_next(actor=actor, agent=agent)) is not None:
            assert (task.assignee_id, task.status) == (agent.pk, Task.Status.IN_PROGRESS)
            claimed[agent.slug].append(task.pk)

    errors = run_together(claim_until_empty, agents)

    # then nothing went wrong and every task went to exactly one agent
    assert errors == []
    all_claims = [task_id for ids in claimed.values() for task_id in ids]
    assert len(all_claims) == TASKS
    assert len(set(all_claims)) == TASKS
    assert set(all_claims) == set(Task.objects.values_list("pk", flat=True))
    # and the database agrees with what each thread was told
    holder_by_task = {task_id: slug for slug, ids in claimed.items() for task_id in ids}
    assert dict(Task.objects.values_list("pk", "assignee__slug")) == holder_by_task
    assert Task.objects.filter(status=Task.Status.IN_PROGRESS, assignee__isnull=False).count() == TASKS
    assert TaskClaim.objects.count() == TASKS
    assert TaskClaim.objects.filter(outcome=TaskClaim.Outcome.OPEN).values("task").distinct().count() == TASKS
    assert Counter(Event.objects.values_list("name", flat=True)) == Counter({"task.claimed": TASKS})
    # and each thread was handed its tasks in queue order (priority, then rank)
    order = {pk: (priority, rank) for pk, priority, rank in Task.objects.values_list("pk", "priority", "rank")}
    for ids in claimed.values():
        assert [order[pk] for pk in ids] == sorted(order[pk] for pk in ids)


@pytest.mark.parametrize("round_", range(5))
def test_racing_for_one_task_has_exactly_one_winner(round_):
    # given one ready task and 16 agents that want it
    agents = [AgentFactory(slug=f"racer-{n:02d}") for n in range(THREADS)]
    task = Task.objects.create(title="The only task", status=Task.Status.READY, rank=1024)
    won: list[str] = []
    refused: list[DomainError] = []

    # when they all claim it at once
    def claim(agent):
        # Each thread loads its own instance: task_claim refreshes the one it is given.
        mine = Task.objects.get(pk=task.pk)
        try:
            _, changed = services.task_claim(actor=Actor(agent=agent), agent=agent, task=mine)
        except DomainError as exc:
            refused.append(exc)
        else:
            assert changed is True
            won.append(agent.slug)

    errors = run_together(claim, agents)

    # then exactly one holds it and the other fifteen were told it is taken by the winner
    assert errors == []
    assert len(won) == 1
    assert len(refused) == THREADS - 1
    assert {exc.code for exc in refused} == {"conflict"}
    assert {exc.message for exc in refused} == {
        f"Task {task.pk} is in_progress, held by {won[0]}; only ready tasks can be claimed."
    }
    task.refresh_from_db()
    assert (task.status, task.assignee.slug) == (Task.Status.IN_PROGRESS, won[0])
    assert list(TaskClaim.objects.values_list("task_id", "agent__slug", "outcome")) == [(task.pk, won[0], "open")]
    assert Event.objects.filter(name="task.claimed").count() == 1
