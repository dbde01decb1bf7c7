"""Agent metrics over a period (composition/metrics.py) and the agents page that shows them."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from board.models import Task
from composition.metrics import agent_metrics, metrics_window
from config.pages import ENGINEERS, PRODUCT_OWNERS
from ledger.models import ToolInvocation
from tests.factories import AgentFactory, SessionFactory, TaskFactory, ToolCallFactory
from tests.page_users import user_in

S = ToolInvocation.Status


def _call(session, *, status=S.SUCCESS, ago=timedelta(minutes=5)):
    at = timezone.now() - ago
    return ToolCallFactory(session=session, status=status, started_at=at, finished_at=at, duration_ms=10)


def _task(agent, *, status, minutes, ago=timedelta(hours=1)):
    finished = timezone.now() - ago
    return TaskFactory(
        assignee=agent, status=status, started_at=finished - timedelta(minutes=minutes), finished_at=finished
    )


@pytest.mark.django_db
def test_metrics_count_tasks_and_tool_calls_in_the_period_only():
    agent = AgentFactory(slug="worker")
    session = SessionFactory(agent=agent)
    _task(agent, status=Task.Status.DONE, minutes=10)
    _task(agent, status=Task.Status.DONE, minutes=30)
    _task(agent, status=Task.Status.FAILED, minutes=5)
    _task(agent, status=Task.Status.DONE, minutes=99, ago=timedelta(days=3))  # outside 24h
    _call(session)
    _call(session, status=S.FAILURE)
    _call(session, status=S.FAILURE)
    _call(session)
    _call(session, ago=timedelta(days=2))  # outside 24h

    metrics = agent_metrics(window=metrics_window(period="24h"))[agent.pk]

    assert (metrics.tasks_done, metrics.tasks_failed) == (2, 1)
    assert metrics.success_rate == pytest.approx(2 / 3)
    assert metrics.mean_task_seconds == pytest.approx(20 * 60)
    assert (metrics.tool_calls, metrics.tool_failures) == (4, 2)
    assert metrics.tool_failure_rate == 0.5
    assert len(metrics.buckets) == 24
    assert sum(calls for calls, _ in metrics.buckets) == 4
    assert sum(failed for _, failed in metrics.buckets) == 2


@pytest.mark.django_db
def test_a_longer_period_takes_older_work_in_daily_buckets():
    agent = AgentFactory(slug="worker")
    session = SessionFactory(agent=agent)
    _task(agent, status=Task.Status.DONE, minutes=99, ago=timedelta(days=3))
    _call(session, ago=timedelta(days=2))

    metrics = agent_metrics(window=metrics_window(period="7d"))[agent.pk]

    assert (metrics.tasks_done, metrics.tool_calls) == (1, 1)
    assert len(metrics.buckets) == 7
    assert metrics.buckets[-3] == (1, 0)


@pytest.mark.django_db
def test_an_unknown_period_falls_back_to_24_hours():
    assert metrics_window(period="forever").key == "24h"


def _engineer_client() -> Client:
    client = Client()
    client.force_login(user_in(ENGINEERS))
    return client


def _busy_agents(count: int):
    for n in range(count):
        agent = AgentFactory(slug=f"agent-{n:02d}")
        session = SessionFactory(agent=agent)
        _call(session)
        _call(session, status=S.FAILURE)
        _task(agent, status=Task.Status.DONE, minutes=3)
        TaskFactory(assignee=agent, status=Task.Status.IN_PROGRESS, title=f"Doing {n}")


@pytest.mark.django_db
@pytest.mark.parametrize("count", [2, 20])
def test_the_agents_page_query_count_does_not_grow_with_agents(count, django_assert_num_queries):
    _busy_agents(count)
    client = _engineer_client()

    # session, user, groups; agents, tasks in progress, worktrees, open sessions, task and tool-call
    # aggregates; the usage chart's cost and tokens per agent and day (usage/pages, one for all agents)
    with django_assert_num_queries(10):
        response = client.get("/agents/?period=7d")

    assert response.status_code == 200
    assert len(response.context["rows"]) == count


@pytest.mark.django_db
def test_the_agents_page_shows_holdings_metrics_and_a_chart():
    _busy_agents(2)

    response = _engineer_client().get("/agents/?period=30d")

    html = response.content.decode()
    assert '<option value="30d" selected>' in html
    assert "Doing 0" in html and "Doing 1" in html
    assert "1 open session" in html
    assert "50%" in html  # tool failure rate
    assert "100%" in html  # task success rate
    assert '<svg width="168" height="36" preserveAspectRatio="none"' in html
    assert 'class="bar-fail"' in html


@pytest.mark.django_db
def test_a_product_owner_cannot_open_the_agents_page():
    client = Client()
    client.force_login(user_in(PRODUCT_OWNERS))

    assert client.get("/agents/").status_code == 403
