"""The board's card query is built once per thread (board/selectors.py: board_task_list) and handed out
as a fresh copy: the same SQL and rows as one built afresh, built again when what the card extras
depend on moves (a budget's day), and never shared between threads."""

import datetime as dt
import threading

import pytest
from django.utils import timezone

from board import selectors
from board.models import Task
from tests.factories import AgentFactory, TaskFactory
from usage import budgets
from usage.models import Budget

pytestmark = pytest.mark.django_db


def _sql(queryset) -> str:
    return str(queryset.query)


def test_the_memoised_query_is_the_query_built_afresh():
    agent = AgentFactory()
    tasks = [TaskFactory(title=f"t{n}", status=Task.Status.IN_PROGRESS, assignee=agent) for n in range(3)]
    Budget.objects.create(scope=Budget.Scope.AGENT, agent=agent, limit_tokens=10, warned_at=timezone.now())
    first, second = selectors.board_task_list(), selectors.board_task_list()

    assert first is not second  # each caller gets its own copy
    assert _sql(first) == _sql(second) == _sql(selectors._board_task_query())
    fresh = list(selectors._board_task_query())
    for got in (list(first), selectors.board_cards(task_ids=[t.pk for t in tasks])):
        assert [t.pk for t in got] == [t.pk for t in fresh]
        assert [(t.budget_agent, t.usage_tokens, t.run_status) for t in got] == [
            (t.budget_agent, t.usage_tokens, t.run_status) for t in fresh
        ]
    assert {t.budget_agent for t in fresh} == {1}  # the warning is on every card at work


def test_a_new_day_builds_the_query_again(monkeypatch):
    today = selectors.board_task_list()
    tomorrow = budgets.day_start() + dt.timedelta(days=1, hours=1)
    monkeypatch.setattr(budgets.timezone, "now", lambda: tomorrow)

    later = selectors.board_task_list()

    assert _sql(later) != _sql(today)  # the day budgets' "since" moved
    assert _sql(later) == _sql(selectors._board_task_query())


def test_each_thread_builds_its_own():
    selectors.board_task_list()
    mine = selectors._card_query.built[1]
    theirs = []
    thread = threading.Thread(
        target=lambda: (selectors.board_task_list(), theirs.append(selectors._card_query.built[1]))
    )
    thread.start()
    thread.join()
    assert theirs and theirs[0] is not mine
