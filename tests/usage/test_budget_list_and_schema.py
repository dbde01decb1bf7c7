"""The budgets list reads every budget's spend in a fixed number of queries (usage/budgets.py:
budgets_spent, the same figures as budget_spent), and the OpenAPI schema describes the tool-call
answer's ``policy`` and ``budget`` verdicts as the server renders them."""

import datetime as dt
import json
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer

from board.models import Task
from sessions_app.models import AgentSession
from tests.factories import AgentFactory, CampaignFactory, SessionFactory, TaskFactory
from usage.budgets import budget_spent, budgets_spent
from usage.models import Budget, UsageRecord

pytestmark = pytest.mark.django_db

Scope = Budget.Scope
_keys = iter(range(10**6))


def _usage(agent, *, task=None, tokens=(0, 0), cost="0", when=None) -> None:
    UsageRecord.objects.create(
        agent=agent,
        task=task,
        model="claude-sonnet-4-5",
        input_tokens=tokens[0],
        output_tokens=tokens[1],
        cost_usd=Decimal(cost),
        occurred_at=when or timezone.now(),
        source=UsageRecord.Source.OTLP_LOG,
        idempotency_key=f"list-{next(_keys)}",
    )


def _one_of_each(n: int) -> list[Budget]:
    """Budgets of every scope over ``n`` agents, tasks and campaigns, each with usage of its own."""
    made = []
    yesterday = timezone.now() - dt.timedelta(days=1)
    for i in range(n):
        agent = AgentFactory(slug=f"list-agent-{n}-{i}")
        campaign = CampaignFactory(name=f"C{n}-{i}")
        task = TaskFactory(title=f"T{n}-{i}", campaign=campaign, status=Task.Status.IN_PROGRESS, assignee=agent)
        _usage(agent, task=task, tokens=(100 * (i + 1), 7), cost="0.25")
        _usage(agent, task=None, tokens=(1000, 0), cost="1.5")
        _usage(agent, task=task, tokens=(50_000, 0), cost="9", when=yesterday)  # not today's
        made += [
            Budget.objects.create(scope=Scope.TASK, task=task, limit_tokens=10_000),
            Budget.objects.create(scope=Scope.CAMPAIGN, campaign=campaign, limit_usd=100),
            Budget.objects.create(scope=Scope.AGENT, agent=agent, limit_tokens=100_000),
            Budget.objects.create(scope=Scope.DAY, agent=agent, limit_usd=5),
        ]
    return made


def test_budgets_spent_gives_each_budget_what_budget_spent_gives_it():
    budgets = _one_of_each(3) + [Budget.objects.create(scope=Scope.DAY, limit_usd=50)]
    budgets.append(Budget.objects.create(scope=Scope.TASK, task=TaskFactory(title="Unspent"), limit_usd=1))

    together = budgets_spent(budgets=budgets)

    assert together == {b.pk: budget_spent(budget=b) for b in budgets}
    assert together[budgets[-1].pk].tokens == 0 and together[budgets[-2].pk].tokens == 3 * 1000 + 100 + 200 + 300 + 21


def test_budgets_spent_of_no_budgets_asks_nothing(django_assert_num_queries):
    with django_assert_num_queries(0):
        assert budgets_spent(budgets=[]) == {}


def _list_queries(client) -> tuple[int, list]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get("/api/v1/budgets/")
    assert response.status_code == 200, response.content
    return len(captured), response.json()


def test_the_list_runs_the_same_queries_for_4_or_40_budgets(staff_client):
    Budget.objects.create(scope=Scope.DAY, limit_usd=50)
    _one_of_each(1)
    _list_queries(staff_client)  # warm: the session and the user
    few, listed = _list_queries(staff_client)
    assert len(listed) == 5

    _one_of_each(10)
    many, listed = _list_queries(staff_client)

    assert len(listed) == 45
    assert many == few
    by_id = {row["id"]: row for row in listed}
    for budget in Budget.objects.all():
        spent = budget_spent(budget=budget)
        assert (by_id[budget.pk]["spent_tokens"], Decimal(by_id[budget.pk]["spent_usd"])) == (spent.tokens, spent.usd)


def test_an_agent_lists_its_budgets_in_a_fixed_number_of_queries_too(agent_client, agent):
    SessionFactory(agent=agent, id="list-s", status=AgentSession.Status.RUNNING)
    Budget.objects.create(scope=Scope.AGENT, agent=agent, limit_tokens=10)

    def task_budgets(count: int) -> None:
        for _ in range(count):
            task = TaskFactory(title=f"Mine {next(_keys)}", status=Task.Status.IN_PROGRESS, assignee=agent)
            Budget.objects.create(scope=Scope.TASK, task=task, limit_tokens=10)
            _usage(agent, task=task, tokens=(3, 0))

    task_budgets(1)
    _list_queries(agent_client)  # warm: the key's first use
    few, _ = _list_queries(agent_client)
    task_budgets(5)

    many, listed = _list_queries(agent_client)

    assert many == few and len(listed) == 7
    assert sorted(row["spent_tokens"] for row in listed) == [3] * 6 + [18]


# --- the tool-call answer in the schema -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def spec(django_db_blocker):
    with django_db_blocker.unblock():
        generated = SchemaGenerator().get_schema(request=None, public=True)
    return json.loads(OpenApiJsonRenderer().render(generated, renderer_context={}))


def _started(spec) -> dict:
    written = spec["paths"]["/api/v1/sessions/{session_id}/tool-calls/"]["post"]["responses"]["201"]
    ref = written["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
    one = next(
        option["$ref"].rsplit("/", 1)[-1]
        for option in spec["components"]["schemas"][ref]["oneOf"]
        if "Batch" not in option["$ref"]
    )
    return spec["components"]["schemas"][one]


def _component(spec, prop: dict) -> dict:
    ref = prop.get("$ref") or next(p["$ref"] for p in prop.get("allOf", []) if "$ref" in p)
    return spec["components"]["schemas"][ref.rsplit("/", 1)[-1]]


def test_the_schema_describes_both_verdicts_of_the_tool_call_answer(spec):
    started = _started(spec)

    assert {"policy", "budget"} <= set(started["properties"])
    assert "policy" not in started.get("required", []) and "budget" not in started.get("required", [])
    policy = _component(spec, started["properties"]["policy"])
    assert set(policy["properties"]) == {"decision", "pattern", "reason", "request_id"}
    budget = _component(spec, started["properties"]["budget"])
    assert {"exceeded", "request_id", "question", "reason", "budget", "scope"} <= set(budget["required"])
    description = spec["paths"]["/api/v1/sessions/{session_id}/tool-calls/"]["post"]["description"]
    assert "`policy`" in description and "`budget`" in description


def test_the_budget_verdict_the_server_renders_has_the_documented_keys(spec, agent_client, agent):
    """The schema and usage/budgets.py: budget_tool_use_verdict describe the same keys (they live in
    different apps: the ledger renders the answer, usage makes it)."""
    session = SessionFactory(agent=agent, id="schema-s", status=AgentSession.Status.RUNNING)
    now = timezone.now()
    Budget.objects.create(scope=Scope.AGENT, agent=agent, limit_usd=1, warned_at=now, exceeded_at=now)

    response = agent_client.post(
        f"/api/v1/sessions/{session.pk}/tool-calls/", {"id": "toolu_s", "tool_name": "Bash"}, format="json"
    )

    assert response.status_code == 201
    budget = _component(spec, _started(spec)["properties"]["budget"])
    verdict = response.json()["budget"]
    assert set(verdict) == set(budget["properties"])
    assert set(budget["required"]) <= set(verdict)
    assert verdict["scope"] == "agent" and verdict["agent"] == "claude-1" and verdict["limit_usd"] == "1.0000"
