"""One agent's huge token counts must not break usage for everyone (issue 24): a record over the caps
of one usage row (usage.models TOKENS_MAX, COST_MAX) is refused, counted in the export's
partialSuccess, and the database refuses such a row from any path, so every sum stays exact."""

import datetime as dt
import json
from decimal import Decimal

import pytest
from django.db import IntegrityError, transaction

from tests.factories import CampaignFactory, SessionFactory, TaskFactory
from tests.usage import payloads as p
from usage.models import COST_MAX, TOKENS_MAX, Budget, UsageRecord

pytestmark = pytest.mark.django_db

LOGS = "/api/v1/otlp/v1/logs"
TRACES = "/api/v1/otlp/v1/traces"
INT64_MAX = 2**63 - 1
SESSION = "0c6a7c1e-4b8e-4f57-9d6e-1f2a3b4c5d6e"


def _huge_spans(session_id: str) -> dict:
    """Three chat spans, each claiming the largest int64 of input tokens."""
    document = p.gen_ai_spans(session_id)
    spans = []
    for n in range(3):
        span = dict(document["resourceSpans"][0]["scopeSpans"][0]["spans"][1])
        span["spanId"] = f"{n:016x}"
        span["attributes"] = [
            a if a["key"] != "gen_ai.usage.input_tokens" else {"key": a["key"], "value": {"intValue": str(INT64_MAX)}}
            for a in span["attributes"]
        ]
        spans.append(span)
    document["resourceSpans"][0]["scopeSpans"][0]["spans"] = spans
    return document


@pytest.fixture
def work(agent):
    task = TaskFactory(title="Ship it", campaign=CampaignFactory(name="Launch"))
    SessionFactory(agent=agent, id=SESSION, task=task)
    Budget.objects.create(scope=Budget.Scope.DAY, limit_tokens=1_000_000)
    return task


def test_huge_token_counts_are_refused_and_usage_works_for_everyone(
    agent_client, other_client, staff_client, work, settings
):
    response = agent_client.post(TRACES, data=p.as_json(_huge_spans(SESSION)), content_type="application/json")

    assert response.status_code == 200
    partial = response.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "3"
    assert f"from 0 to {TOKENS_MAX}" in partial["errorMessage"]
    assert "gen_ai.usage.input_tokens" in partial["errorMessage"]
    assert not UsageRecord.objects.exists()
    # Usage of everyone else goes on, and every read of it answers.
    other = other_client.post(
        LOGS, data=p.as_json(p.logs_json(p.claude_api_request("x"))), content_type="application/json"
    )
    assert (other.status_code, other.json()) == (200, {})
    for group in ("agent", "task", "campaign", "day"):
        assert staff_client.get("/api/v1/usage/", {"group_by": group}).status_code == 200, group
    assert staff_client.get("/api/v1/budgets/").status_code == 200
    created = staff_client.post("/api/v1/budgets/", {"scope": "task", "task": work.pk, "limit_usd": "5"}, format="json")
    assert created.status_code == 201, created.content
    for page in ("/agents/", f"/sessions/{SESSION}/", "/admin/usage/usagerecord/", "/admin/sessions_app/agent/"):
        assert staff_client.get(page).status_code == 200, page


@pytest.mark.parametrize(
    ("attribute", "value", "message"),
    [
        ("input_tokens", INT64_MAX, f"input_tokens must be from 0 to {TOKENS_MAX}"),
        ("cache_read_tokens", str(TOKENS_MAX + 1), f"cache_read_tokens must be from 0 to {TOKENS_MAX}"),
        ("cost_usd", "1e18", f"cost_usd must be from 0 to {COST_MAX}"),
    ],
)
def test_a_log_record_over_the_caps_is_refused_and_the_others_kept(agent_client, work, attribute, value, message):
    huge = p.claude_api_request(SESSION, sequence=1, as_strings=True, **{attribute: value})
    fine = p.claude_api_request(SESSION, sequence=2, input_tokens=TOKENS_MAX, output_tokens=TOKENS_MAX)

    response = agent_client.post(LOGS, data=p.as_json(p.logs_json(huge, fine)), content_type="application/json")

    assert response.status_code == 200
    assert response.json()["partialSuccess"]["rejectedLogRecords"] == "1"
    assert message in response.json()["partialSuccess"]["errorMessage"]
    assert list(UsageRecord.objects.values_list("input_tokens", "output_tokens")) == [(TOKENS_MAX, TOKENS_MAX)]


@pytest.mark.parametrize(
    "values",
    [
        {"input_tokens": TOKENS_MAX + 1},
        {"output_tokens": INT64_MAX},
        {"cache_read_tokens": TOKENS_MAX + 1},
        {"cache_creation_tokens": TOKENS_MAX + 1},
        {"cost_usd": Decimal(COST_MAX) + Decimal("0.00000001")},
    ],
)
def test_the_database_refuses_a_row_over_the_caps(agent, values):
    with pytest.raises(IntegrityError), transaction.atomic():
        UsageRecord.objects.create(
            agent=agent,
            occurred_at=dt.datetime(2026, 11, 20, tzinfo=dt.UTC),
            source=UsageRecord.Source.OTLP_LOG,
            idempotency_key="k",
            **values,
        )


def test_rows_at_the_caps_sum_exactly(agent, staff_client, work):
    for n in range(12):
        UsageRecord.objects.create(
            agent=agent,
            task=work,
            input_tokens=TOKENS_MAX,
            output_tokens=TOKENS_MAX,
            cache_read_tokens=TOKENS_MAX,
            cache_creation_tokens=TOKENS_MAX,
            cost_usd=COST_MAX,
            occurred_at=dt.datetime.now(dt.UTC),
            source=UsageRecord.Source.OTLP_LOG,
            idempotency_key=str(n),
        )

    rows = staff_client.get("/api/v1/usage/", {"group_by": "task"}).json()["results"]
    budget = staff_client.get("/api/v1/budgets/").json()[0]

    assert [(r["input_tokens"], r["cache_creation_tokens"], r["cost_usd"]) for r in rows] == [
        (12 * TOKENS_MAX, 12 * TOKENS_MAX, f"{12 * COST_MAX}.00000000")
    ]
    assert (budget["spent_tokens"], budget["state"]) == (24 * TOKENS_MAX, "exceeded")
    assert json.loads(json.dumps(budget))["spent_usd"] == f"{12 * COST_MAX}.00000000"
