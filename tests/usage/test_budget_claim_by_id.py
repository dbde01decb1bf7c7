"""Claiming a task by id (POST /api/v1/tasks/{id}/claim/) is refused, with a 409 naming the budget, for
what claim-next would skip or refuse: an exceeded budget of the task, its campaign, the agent or the day
(board/claim_gates.py, usage/budgets.py: budget_claim_block). A refusal writes nothing."""

import pytest
from django.utils import timezone

from board.models import Task, TaskClaim
from ledger.models import Event
from tests.factories import CampaignFactory, SessionFactory, TaskFactory
from tests.usage import payloads as p
from usage.models import Budget

pytestmark = pytest.mark.django_db

Scope = Budget.Scope
SID = "2b6f1c0e-8a7d-4e3f-9c2b-1a0d9e8f7c6b"


def _claim(client, task: Task):
    return client.post(f"/api/v1/tasks/{task.pk}/claim/", {}, format="json")


def _exceeded(level: str, *, task: Task, agent) -> Budget:
    targets = {
        "task": {"scope": Scope.TASK, "task": task},
        "campaign": {"scope": Scope.CAMPAIGN, "campaign": task.campaign},
        "agent": {"scope": Scope.AGENT, "agent": agent},
        "day": {"scope": Scope.DAY},
        "agent-day": {"scope": Scope.DAY, "agent": agent},
    }
    now = timezone.now()
    return Budget.objects.create(**targets[level], limit_tokens=100, warned_at=now, exceeded_at=now)


def _assert_nothing_claimed(task: Task) -> None:
    task.refresh_from_db()
    assert (task.status, task.assignee_id, task.session_id, task.started_at) == (Task.Status.READY, None, None, None)
    assert not TaskClaim.objects.filter(task_id=task.pk).exists()
    assert not Event.objects.filter(name="task.claimed").exists()


@pytest.mark.parametrize(
    ("level", "named"),
    [
        ("task", "Task {task} can't be claimed: Budget exceeded (task {task}: 100 tokens)"),
        ("campaign", "Task {task} can't be claimed: Budget exceeded (campaign {campaign}: 100 tokens)"),
        ("agent", "Agent 'claude-1' is handed no new task: Budget exceeded (agent claude-1: 100 tokens)"),
        ("day", "Agent 'claude-1' is handed no new task: Budget exceeded (today's budget: 100 tokens)"),
        (
            "agent-day",
            "Agent 'claude-1' is handed no new task: Budget exceeded (today's budget of agent claude-1: 100 tokens)",
        ),
    ],
)
def test_an_exceeded_budget_refuses_the_claim_by_id_naming_it_and_writes_nothing(agent_client, agent, level, named):
    task = TaskFactory(title="Ready", campaign=CampaignFactory(name="Launch"))
    _exceeded(level, task=task, agent=agent)

    response = _claim(agent_client, task)

    assert response.status_code == 409, response.content
    expected = named.format(task=task.pk, campaign=task.campaign_id) + ": raise it in Switchyard or stop."
    assert response.json()["message"] == expected
    _assert_nothing_claimed(task)


def test_claim_next_and_the_claim_by_id_leave_alone_the_same_tasks(agent_client, agent):
    stopped = TaskFactory(title="In the spent campaign", campaign=CampaignFactory(name="Spent"))
    capped = TaskFactory(title="Its own budget spent")
    free = TaskFactory(title="Elsewhere", campaign=CampaignFactory(name="Other"))
    _exceeded("campaign", task=stopped, agent=agent)
    _exceeded("task", task=capped, agent=agent)

    assert _claim(agent_client, stopped).status_code == 409
    assert _claim(agent_client, capped).status_code == 409
    _assert_nothing_claimed(stopped)
    _assert_nothing_claimed(capped)
    next_one = agent_client.post("/api/v1/tasks/claim-next/", {}, format="json")
    assert next_one.status_code == 200 and next_one.json()["id"] == free.pk
    assert agent_client.post("/api/v1/tasks/claim-next/", {}, format="json").status_code == 204


def test_another_agents_exceeded_budget_does_not_refuse_this_agent(agent_client, other_agent):
    task = TaskFactory(title="Ready")
    _exceeded("agent", task=task, agent=other_agent)
    _exceeded("agent-day", task=task, agent=other_agent)

    response = _claim(agent_client, task)

    assert response.status_code == 200, response.content
    task.refresh_from_db()
    assert task.status == Task.Status.IN_PROGRESS and task.assignee.slug == "claude-1"


def test_a_day_budget_of_an_earlier_day_refuses_nothing(agent_client, agent):
    task = TaskFactory(title="Ready")
    yesterday = timezone.now() - timezone.timedelta(days=1)
    Budget.objects.create(scope=Scope.DAY, limit_tokens=100, warned_at=yesterday, exceeded_at=yesterday)

    assert _claim(agent_client, task).status_code == 200


def test_a_task_already_held_stays_a_no_op_when_its_budget_is_exceeded(agent_client, agent):
    task = TaskFactory(title="Mine")
    assert _claim(agent_client, task).status_code == 200
    _exceeded("task", task=task, agent=agent)
    claims = TaskClaim.objects.count()

    again = _claim(agent_client, task)

    assert again.status_code == 200 and again.json()["id"] == task.pk
    assert TaskClaim.objects.count() == claims == 1


def test_usage_by_otlp_exceeds_the_campaign_and_a_raise_lets_the_claim_through(agent_client, staff_client, agent):
    """End to end: the usage arrives by OTLP on one task of the campaign; another task of it is refused
    by id until a person raises the campaign's budget."""
    campaign = CampaignFactory(name="Launch")
    working = TaskFactory(title="Working", campaign=campaign, status=Task.Status.IN_PROGRESS, assignee=agent)
    SessionFactory(agent=agent, id=SID, task=working)
    next_task = TaskFactory(title="Next in the campaign", campaign=campaign)
    budget = Budget.objects.create(scope=Scope.CAMPAIGN, campaign=campaign, limit_tokens=1000)
    record = p.claude_api_request(
        SID,
        sequence=1,
        input_tokens=1200,
        output_tokens=0,
        cost_usd=0.01,
        time_unix_nano=int(timezone.now().timestamp() * 1e9),
    )
    exported = agent_client.post(
        "/api/v1/otlp/v1/logs", data=p.as_json(p.logs_json(record)), content_type="application/json"
    )
    assert exported.status_code == 200

    refused = _claim(agent_client, next_task)
    assert refused.status_code == 409
    assert f"Budget exceeded (campaign {campaign.pk}: 1000 tokens)" in refused.json()["message"]
    _assert_nothing_claimed(next_task)

    raised = staff_client.patch(f"/api/v1/budgets/{budget.pk}/", {"limit_tokens": 5000}, format="json")
    assert raised.status_code == 200 and raised.json()["state"] == "ok"

    claimed = _claim(agent_client, next_task)
    assert claimed.status_code == 200, claimed.content
    next_task.refresh_from_db()
    assert next_task.status == Task.Status.IN_PROGRESS and next_task.assignee_id == agent.pk
