"""GET /api/v1/usage/?group_by=...: sums per agent, task, campaign and day, and who sees what."""

import datetime as dt
from decimal import Decimal

import pytest
from django.db import IntegrityError, transaction

from config.actors import Actor
from tests.factories import AgentFactory, CampaignFactory, SessionFactory, TaskFactory
from usage.models import UsageRecord
from usage.selectors import usage_rollup

pytestmark = pytest.mark.django_db

DAY1 = dt.datetime(2026, 11, 20, 10, 0, tzinfo=dt.UTC)
DAY2 = dt.datetime(2026, 11, 21, 23, 59, tzinfo=dt.UTC)


def _row(agent, *, key, session=None, task=None, when=DAY1, cost="0.5", tokens=(100, 10, 1000, 50), tool=""):
    return UsageRecord.objects.create(
        agent=agent,
        session=session,
        task=task,
        model="claude-sonnet-4-5",
        tool_name=tool,
        input_tokens=tokens[0],
        output_tokens=tokens[1],
        cache_read_tokens=tokens[2],
        cache_creation_tokens=tokens[3],
        cost_usd=Decimal(cost),
        occurred_at=when,
        source=UsageRecord.Source.OTLP_LOG,
        idempotency_key=key,
    )


@pytest.fixture
def world(agent, other_agent):
    campaign = CampaignFactory(name="Launch")
    task_a = TaskFactory(title="Task A", campaign=campaign)
    task_b = TaskFactory(title="Task B")
    session = SessionFactory(agent=agent, id="s-a", task=task_a)
    _row(agent, key="1", session=session, task=task_a, cost="1.25")
    _row(agent, key="2", session=session, task=task_a, cost="0.75", when=DAY2)
    _row(agent, key="3", task=task_a, tool="Bash", cost="0", tokens=(0, 0, 0, 0))
    _row(other_agent, key="4", task=task_b, cost="2.00000001", when=DAY2)
    _row(other_agent, key="5", cost="0.1")
    return {"campaign": campaign, "task_a": task_a, "task_b": task_b}


def test_group_by_agent_for_an_orchestrator(orchestrator_client, world, django_assert_num_queries):
    # Key and agent lookup, the liveness write, the aggregate of the usage rows and that of the ledger's tool calls.
    with django_assert_num_queries(6):
        response = orchestrator_client.get("/api/v1/usage/", {"group_by": "agent"})

    assert response.status_code == 200
    assert response.json() == {
        "group_by": "agent",
        "results": [
            {
                "key": "codex-2",
                "label": "codex-2",
                "input_tokens": 200,
                "output_tokens": 20,
                "cache_read_tokens": 2000,
                "cache_creation_tokens": 100,
                "cost_usd": "2.10000001",
                "requests": 2,
                "tool_calls": 0,
            },
            {
                "key": "claude-1",
                "label": "claude-1",
                "input_tokens": 200,
                "output_tokens": 20,
                "cache_read_tokens": 2000,
                "cache_creation_tokens": 100,
                "cost_usd": "2.00000000",
                "requests": 2,
                "tool_calls": 1,
            },
        ],
    }


def test_an_agent_sees_only_its_own(agent_client, world):
    response = agent_client.get("/api/v1/usage/", {"group_by": "agent"})

    assert [row["key"] for row in response.json()["results"]] == ["claude-1"]


def test_an_agent_asking_for_another_agents_usage_gets_nothing(agent_client, world):
    response = agent_client.get("/api/v1/usage/", {"group_by": "agent", "agent": "codex-2"})

    assert response.status_code == 200
    assert response.json()["results"] == []


def test_group_by_task_and_campaign(staff_client, world):
    by_task = staff_client.get("/api/v1/usage/", {"group_by": "task"}).json()["results"]
    by_campaign = staff_client.get("/api/v1/usage/", {"group_by": "campaign"}).json()["results"]

    assert [(r["key"], r["label"], r["cost_usd"], r["requests"], r["tool_calls"]) for r in by_task] == [
        (str(world["task_b"].pk), "Task B", "2.00000001", 1, 0),
        (str(world["task_a"].pk), "Task A", "2.00000000", 2, 1),
        (None, None, "0.10000000", 1, 0),
    ]
    assert [(r["key"], r["label"], r["cost_usd"]) for r in by_campaign] == [
        (None, None, "2.10000001"),
        (str(world["campaign"].pk), "Launch", "2.00000000"),
    ]


def test_group_by_day_with_filters(staff_client, world):
    all_days = staff_client.get("/api/v1/usage/", {"group_by": "day"}).json()["results"]
    day_two = staff_client.get(
        "/api/v1/usage/", {"group_by": "day", "since": "2026-11-21T00:00:00Z", "until": "2026-11-22T00:00:00Z"}
    ).json()["results"]
    campaign = staff_client.get("/api/v1/usage/", {"group_by": "day", "campaign": world["campaign"].pk}).json()
    one_task = staff_client.get("/api/v1/usage/", {"group_by": "agent", "task": world["task_b"].pk}).json()

    assert [(r["key"], r["cost_usd"], r["requests"]) for r in all_days] == [
        ("2026-11-20", "1.35000000", 2),
        ("2026-11-21", "2.75000001", 2),
    ]
    assert [(r["key"], r["cost_usd"]) for r in day_two] == [("2026-11-21", "2.75000001")]
    assert [(r["key"], r["cost_usd"]) for r in campaign["results"]] == [
        ("2026-11-20", "1.25000000"),
        ("2026-11-21", "0.75000000"),
    ]
    assert [r["key"] for r in one_task["results"]] == ["codex-2"]


def test_session_filter_through_the_selector(agent, world):
    rows = usage_rollup(actor=Actor(agent=agent), group_by="agent", session="s-a")

    assert [(r["key"], r["cost_usd"], r["requests"]) for r in rows] == [("claude-1", Decimal("2.00000000"), 2)]


def test_no_usage_is_an_empty_list(agent_client):
    assert agent_client.get("/api/v1/usage/", {"group_by": "day"}).json() == {"group_by": "day", "results": []}


@pytest.mark.parametrize(
    "query",
    [{}, {"group_by": "week"}, {"group_by": "agent", "since": "yesterday"}, {"group_by": "task", "task": "0"}],
)
def test_bad_queries_are_a_400(agent_client, query):
    response = agent_client.get("/api/v1/usage/", query)

    assert response.status_code == 400
    assert response.json()["message"]


def test_the_database_refuses_negative_amounts_and_a_second_copy(agent):
    _row(agent, key="k")
    for fields in ({"input_tokens": -1}, {"cost_usd": Decimal("-0.01")}, {"duration_ms": -5}, {"source": "what"}):
        values = {"agent": agent, "occurred_at": DAY1, "source": "otlp-log", "idempotency_key": "other", **fields}
        with pytest.raises(IntegrityError), transaction.atomic():
            UsageRecord.objects.create(**values)
    with pytest.raises(IntegrityError), transaction.atomic():
        _row(agent, key="k")
    assert UsageRecord.objects.count() == 1
    _row(AgentFactory(slug="third"), key="k")  # the key is unique per agent, not across agents
