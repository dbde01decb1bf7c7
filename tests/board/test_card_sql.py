"""The card extras' subqueries compiled once (board/card_sql.py) against the card query as the ORM writes it:
the same SQL for each extra, the same parameters and the same value on every card, on rows that give every
extra something to show (usage, each budget level warned and exceeded, yesterday's day budget, runs)."""

import datetime as dt
from decimal import Decimal

import pytest
from django.utils import timezone

from board import selectors
from board.card_extras import card_extra_annotations, card_extras
from board.card_sql import card_annotations_compiled
from board.models import Task
from runners.models import Run
from runners.services import runner_key_create
from tests.factories import AgentFactory, CampaignFactory, TaskFactory
from usage.budgets import day_start
from usage.models import Budget, UsageRecord

pytestmark = pytest.mark.django_db
Scope = Budget.Scope


def _orm_query():
    """The card query with the extras' expressions as written (what board_task_list did before card_sql)."""
    return (
        Task.objects.select_related("assignee", "campaign", "session")
        .only(*selectors.CARD_FIELDS)
        .annotate(**card_extra_annotations())
        .order_by("rank", "id")
    )


def _fields() -> list[str]:
    return [name for extra in card_extras() for name in extra.fields]


@pytest.fixture
def cards():
    """Tasks in every column, some with usage, budgets at each level in each state, and runs."""
    now, yesterday = timezone.now(), day_start() - dt.timedelta(hours=2)
    agents = [AgentFactory(slug=f"agent-{n}") for n in range(3)]
    campaign = CampaignFactory(name="Launch")
    runner = runner_key_create(name="build-1", labels=[], capacity=4)[0]
    tasks = []
    for n, status in enumerate([*Task.Status.values, *Task.Status.values]):
        tasks.append(
            TaskFactory(
                title=f"Task {n}",
                status=status,
                assignee=agents[n % 3] if status == Task.Status.IN_PROGRESS or n % 2 else None,
                campaign=campaign if n % 3 == 0 else None,
                rank=n,
            )
        )
    for n, task in enumerate(tasks[:6]):
        UsageRecord.objects.create(
            agent=agents[0],
            task=task,
            model="claude-sonnet-4-5",
            input_tokens=100 * n,
            output_tokens=7 * n,
            cost_usd=Decimal("0.0125") * n,
            occurred_at=now,
            source=UsageRecord.Source.OTLP_LOG,
            idempotency_key=f"k{n}",
        )
    Budget.objects.create(scope=Scope.TASK, task=tasks[0], limit_tokens=10, warned_at=now)
    Budget.objects.create(scope=Scope.TASK, task=tasks[1], limit_tokens=10, warned_at=now, exceeded_at=now)
    Budget.objects.create(scope=Scope.CAMPAIGN, campaign=campaign, limit_tokens=10, warned_at=now, exceeded_at=now)
    Budget.objects.create(scope=Scope.AGENT, agent=agents[1], limit_tokens=10, warned_at=now)
    Budget.objects.create(scope=Scope.DAY, agent=agents[2], limit_tokens=10, warned_at=yesterday, exceeded_at=yesterday)
    Budget.objects.create(scope=Scope.DAY, limit_tokens=10, warned_at=now)
    in_progress = [task for task in tasks if task.status == Task.Status.IN_PROGRESS]
    Run.objects.create(task=in_progress[0], provider="demo", status=Run.Status.RUNNING, runner=runner, agent=agents[0])
    Run.objects.create(task=tasks[4], provider="demo", status=Run.Status.QUEUED)
    Run.objects.create(task=tasks[5], provider="demo", status=Run.Status.SUCCEEDED, runner=runner)
    return tasks


def _values(tasks: list[Task], fields: list[str]) -> list[tuple]:
    return [(task.pk, *(getattr(task, name) for name in fields)) for task in tasks]


def test_every_card_shows_the_same_values_as_with_the_orm_expressions(cards):
    fields = _fields()
    assert {"usage_tokens", "usage_cost", "budget_task", "budget_day", "run_status", "run_runner"} <= set(fields)
    ids = [task.pk for task in cards]

    board = _values(list(selectors.board_task_list()), fields)
    assert board == _values(list(_orm_query()), fields)
    some = _values(selectors.board_cards(task_ids=ids[3:9]), fields)
    assert some == _values(list(_orm_query().filter(pk__in=ids[3:9])), fields)
    assert [row[0] for row in some] == ids[3:9]
    # The rows gave every extra something to show, so the comparisons above were not of Nones alone.
    shown = {name: {row[1 + n] for row in board} for n, name in enumerate(fields)}
    assert {1, 2} <= shown["budget_task"] and 2 in shown["budget_campaign"] and 1 in shown["budget_day"]
    assert shown["budget_agent_day"] == {None}  # yesterday's exceeded day budget is none today
    assert Decimal("0.0625") in shown["usage_cost"] and 535 in shown["usage_tokens"]
    assert {"running", "queued", None} == shown["run_status"] and "build-1" in shown["run_runner"]


def test_each_extra_is_the_sql_and_parameters_the_orm_writes():
    annotations = card_extra_annotations()
    compiled = card_annotations_compiled(annotations)
    orm_sql, orm_params = _orm_query().query.sql_with_params()
    fast_sql, fast_params = selectors.board_task_list().query.sql_with_params()

    assert fast_params == orm_params
    for name, expression in compiled.items():
        assert f'{expression.sql} AS "{name}"' in orm_sql
        assert f'{expression.sql} AS "{name}"' in fast_sql
        assert expression.output_field.get_internal_type() == annotations[name].output_field.get_internal_type()
    assert set(compiled) == set(annotations)


def test_no_extras_adds_nothing():
    assert card_annotations_compiled({}) == {}
