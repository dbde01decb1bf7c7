"""The memoised "no budget is exceeded" (usage/budgets.py): claim-next and every tool use ask whether a
budget is exceeded, and the answer "none" is believed for NONE_EXCEEDED_MEMO_SECONDS in a process. A
budget exceeded through the service (usage arriving, a limit lowered) is seen at once; one written
behind the service's back only when the memo runs out; an exceeded budget is never memoised."""

import pytest
from django.utils import timezone

from board.models import Task
from sessions_app.models import AgentSession
from tests.factories import SessionFactory, TaskFactory
from tests.usage import payloads as p
from usage import budgets
from usage.models import Budget

pytestmark = pytest.mark.django_db
CLAIM_NEXT = "/api/v1/tasks/claim-next/"
LOGS = "/api/v1/otlp/v1/logs"
SID = "3b1d9a0e-6c2f-4e8a-9d7b-1a2b3c4d5e6f"


def _claim(client):
    return client.post(CLAIM_NEXT, {}, format="json")


def test_none_exceeded_is_memoised_and_runs_out(agent_client, agent, monkeypatch, django_assert_num_queries):
    assert budgets.budgets_exceeded() == []
    with django_assert_num_queries(0):
        assert budgets.budgets_exceeded() == []  # the memo answers
    # Written behind the service's back (as no product code does): unseen while the memo holds...
    Budget.objects.create(scope=Budget.Scope.AGENT, agent=agent, limit_tokens=1, exceeded_at=timezone.now())
    TaskFactory(title="Ready")
    assert budgets.budgets_exceeded() == []
    # ... and seen once it runs out.
    monkeypatch.setattr(budgets.time, "monotonic", lambda: budgets._none_exceeded_until[0] + 0.001)
    assert [b.scope for b in budgets.budgets_exceeded()] == ["agent"]
    response = _claim(agent_client)
    assert response.status_code == 409 and "handed no new task" in response.json()["message"]


def test_usage_that_exceeds_a_budget_stops_the_next_claim_at_once(agent_client, agent):
    """Usage arriving by OTLP marks the budget exceeded (budgets_evaluate): the memo is forgotten, so the
    very next claim-next, well inside the memo's second, is refused."""
    session = SessionFactory(agent=agent, id=SID, status=AgentSession.Status.RUNNING)
    first, second = TaskFactory(title="First"), TaskFactory(title="Second")
    Budget.objects.create(scope=Budget.Scope.AGENT, agent=agent, limit_tokens=100)
    assert _claim(agent_client).json()["id"] == first.pk  # "none exceeded" now memoised
    assert budgets._none_exceeded_until[0] > 0

    record = p.claude_api_request(
        session.pk,
        sequence=1,
        input_tokens=150,
        output_tokens=0,
        cost_usd=0.01,
        time_unix_nano=int(timezone.now().timestamp() * 1e9),
    )
    usage = agent_client.post(LOGS, data=p.as_json(p.logs_json(record)), content_type="application/json")
    assert usage.status_code == 200, usage.content

    response = _claim(agent_client)
    assert response.status_code == 409 and "handed no new task" in response.json()["message"]
    second.refresh_from_db()
    assert second.status == Task.Status.READY and second.assignee_id is None


def test_an_exceeded_budget_is_read_afresh_every_time(agent, django_assert_num_queries):
    Budget.objects.create(scope=Budget.Scope.AGENT, agent=agent, limit_tokens=1, exceeded_at=timezone.now())
    budgets.budgets_exceeded_forget()
    for _ in range(2):
        with django_assert_num_queries(2):  # the EXISTS and the budgets: never from memory
            assert len(budgets.budgets_exceeded()) == 1
