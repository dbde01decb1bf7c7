"""Budgets (usage/budgets.py, SPEC §9): the model's constraints, the API, the warning at 80 % and the
exceeding at 100 % at each level with the usage arriving by OTLP, the PreToolUse verdict, claim-next's
refusal, the raise that lets the work go on, the webhook and the card. The live hook process is in
test_budgets_live.py."""

import datetime as dt
import json

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone
from rest_framework.test import APIClient

from board.cards import card_html
from board.models import Task
from board.selectors import board_task_list
from config.pages import ENGINEERS, PRODUCT_OWNERS
from ledger.models import Event, WebhookDelivery
from ledger.webhooks import webhook_deliver, webhook_deliveries_create, webhook_subscribe
from sessions_app.models import AgentSession, StreamEvent
from tests.factories import AgentFactory, SessionFactory, TaskFactory
from tests.ledger.receiver import Receiver
from tests.page_users import user_in
from tests.usage import payloads as p
from tests.usage.budget_helpers import LEVELS, budget_for, work_session
from usage.models import Budget

pytestmark = pytest.mark.django_db

LOGS = "/api/v1/otlp/v1/logs"
SID = "7f3c2a10-9d8e-4b1a-a6f2-5c4d3e2b1a09"
Scope = Budget.Scope


def _now_nanos() -> int:
    return int(timezone.now().timestamp() * 1e9)


def _usage(client, *, tokens: int, sequence: int, session_id: str = SID) -> None:
    """One Claude Code api_request of ``tokens`` input tokens (no output), now, by OTLP."""
    record = p.claude_api_request(
        session_id, sequence=sequence, input_tokens=tokens, output_tokens=0, cost_usd=0.01, time_unix_nano=_now_nanos()
    )
    response = client.post(LOGS, data=p.as_json(p.logs_json(record)), content_type="application/json")
    assert response.status_code == 200, response.content


def _budget_events(budget: Budget) -> list[str]:
    return list(Event.objects.filter(subject_type="budget", subject_id=str(budget.pk)).values_list("name", flat=True))


@pytest.fixture
def work(agent):
    return work_session(agent, session_id=SID)


# --- the model ------------------------------------------------------------------------------------------
def test_a_budget_limits_something_and_matches_its_scope():
    task = TaskFactory()
    with pytest.raises(IntegrityError), transaction.atomic():
        Budget.objects.create(scope=Scope.TASK, task=task)  # no limit
    with pytest.raises(IntegrityError), transaction.atomic():
        Budget.objects.create(scope=Scope.AGENT, task=task, limit_tokens=10)  # an agent budget on a task
    with pytest.raises(IntegrityError), transaction.atomic():
        Budget.objects.create(scope=Scope.TASK, task=task, limit_tokens=0)
    Budget.objects.create(scope=Scope.TASK, task=task, limit_tokens=10)
    with pytest.raises(IntegrityError), transaction.atomic():
        Budget.objects.create(scope=Scope.TASK, task=task, limit_usd=1)  # one per task
    Budget.objects.create(scope=Scope.DAY, limit_usd=5)
    with pytest.raises(IntegrityError), transaction.atomic():
        Budget.objects.create(scope=Scope.DAY, limit_usd=9)  # one all-agents day budget
    Budget.objects.create(scope=Scope.DAY, agent=AgentFactory(), limit_usd=5)  # and one per agent
    assert Budget.objects.count() == 3


# --- the API ----------------------------------------------------------------------------------------------
def test_staff_sets_a_budget_and_reads_its_spend(staff_client, work, agent_client):
    _usage(agent_client, tokens=300, sequence=1)

    response = staff_client.post(
        "/api/v1/budgets/", {"scope": "task", "task": work.task_id, "limit_tokens": 1000}, format="json"
    )

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["scope"] == "task" and body["task"] == work.task_id and body["agent"] is None
    assert (body["limit_tokens"], body["limit_usd"], body["spent_tokens"], body["state"]) == (1000, None, 300, "ok")
    assert body["percent"] == 30.0
    assert staff_client.get(f"/api/v1/budgets/{body['id']}/").json()["spent_tokens"] == 300


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"scope": "task", "task": 1}, "limit_tokens"),  # no limit
        ({"scope": "task", "limit_usd": "2"}, "task"),  # no task
        ({"scope": "agent", "agent": "claude-1", "task": 1, "limit_usd": "2"}, "task"),  # a task on an agent budget
        ({"scope": "task", "task": 1, "limit_usd": "-1"}, "limit_usd"),
        ({"scope": "task", "task": 1, "limit_tokens": "12"}, "limit_tokens"),  # a string for a number
        ({"scope": "week", "limit_usd": "2"}, "scope"),
        ({"scope": "task", "task": 1, "limit_usd": "2", "colour": "red"}, "colour"),
    ],
)
def test_bad_input_is_a_400_naming_the_field_and_writes_nothing(staff_client, body, field):
    TaskFactory(pk=1)

    response = staff_client.post("/api/v1/budgets/", body, format="json")

    assert response.status_code == 400, response.content
    assert field in response.json()["errors"], response.json()
    assert response.json()["message"]
    assert not Budget.objects.exists()


def test_an_unknown_task_is_a_404_and_a_second_budget_a_409(staff_client):
    response = staff_client.post("/api/v1/budgets/", {"scope": "task", "task": 999, "limit_usd": "1"}, format="json")
    assert response.status_code == 404 and "task" in response.json()["message"]
    Budget.objects.create(scope=Scope.DAY, limit_usd=1)
    response = staff_client.post("/api/v1/budgets/", {"scope": "day", "limit_usd": "2"}, format="json")
    assert response.status_code == 409
    assert list(Budget.objects.values_list("limit_usd", flat=True)) == [1]


def test_an_agent_reads_the_budgets_that_apply_to_it_and_changes_none(agent_client, other_client, work):
    own = budget_for("agent", work, limit_tokens=1000)
    others = Budget.objects.create(scope=Scope.AGENT, agent=other_client.agent, limit_tokens=5)
    task_budget = budget_for("task", work, limit_usd=3)

    listed = agent_client.get("/api/v1/budgets/").json()
    assert sorted(b["id"] for b in listed) == sorted([own.pk, task_budget.pk])

    assert agent_client.get(f"/api/v1/budgets/{others.pk}/").status_code == 404
    assert other_client.get(f"/api/v1/budgets/{own.pk}/").status_code == 404
    refused = agent_client.patch(f"/api/v1/budgets/{own.pk}/", {"limit_tokens": 10**9}, format="json")
    assert refused.status_code == 403
    assert agent_client.delete(f"/api/v1/budgets/{own.pk}/").status_code == 403
    created = agent_client.post("/api/v1/budgets/", {"scope": "day", "limit_usd": "1"}, format="json")
    assert created.status_code == 403
    own.refresh_from_db()
    assert own.limit_tokens == 1000 and Budget.objects.count() == 3
    assert not Event.objects.filter(subject_type="budget").exists()


# --- each level: warning at 80 %, exceeded at 100 %, once -------------------------------------------------------
def _person_client(*groups: str, username: str) -> APIClient:
    client = APIClient()
    client.force_login(user_in(*groups, username=username))
    return client


@pytest.mark.parametrize("group", [PRODUCT_OWNERS, ENGINEERS])
def test_people_who_work_the_board_set_raise_and_remove_budgets_by_the_api(group, work):
    # given a person of the board's groups, not staff (the README: they write budgets here)
    person = _person_client(group, username="board-person")

    created = person.post(
        "/api/v1/budgets/", {"scope": "task", "task": work.task_id, "limit_tokens": 10}, format="json"
    )
    assert created.status_code == 201, created.content
    budget_id = created.json()["id"]
    assert [b["id"] for b in person.get("/api/v1/budgets/").json()] == [budget_id]
    raised = person.patch(f"/api/v1/budgets/{budget_id}/", {"limit_tokens": 500}, format="json")
    assert (raised.status_code, raised.json()["limit_tokens"]) == (200, 500)
    assert person.delete(f"/api/v1/budgets/{budget_id}/").status_code == 204
    assert sorted(_budget_events(Budget(pk=budget_id))) == ["budget.changed", "budget.created", "budget.deleted"]


def test_a_person_outside_the_boards_groups_is_refused_and_changes_nothing(work):
    budget = budget_for("task", work, limit_tokens=1000)
    outsider = _person_client(username="outsider")

    responses = [
        outsider.get("/api/v1/budgets/"),
        outsider.get(f"/api/v1/budgets/{budget.pk}/"),
        outsider.post("/api/v1/budgets/", {"scope": "day", "limit_usd": "1"}, format="json"),
        outsider.patch(f"/api/v1/budgets/{budget.pk}/", {"limit_tokens": 10**9}, format="json"),
        outsider.delete(f"/api/v1/budgets/{budget.pk}/"),
    ]

    assert [r.status_code for r in responses] == [403] * 5
    assert responses[0].json()["message"] == (
        "This endpoint is for staff and the product owners or engineers groups; you are in no group."
    )
    budget.refresh_from_db()
    assert budget.limit_tokens == 1000 and Budget.objects.count() == 1
    # and the rest of the API stays for agents and staff
    assert _person_client(PRODUCT_OWNERS, username="po-elsewhere").get("/api/v1/usage/").status_code == 403


@pytest.mark.parametrize("level", LEVELS)
def test_usage_by_otlp_warns_at_80_and_exceeds_at_100_percent_once(agent_client, work, level):
    budget = budget_for(level, work, limit_tokens=1000)

    _usage(agent_client, tokens=700, sequence=1)
    assert _budget_events(budget) == []
    _usage(agent_client, tokens=150, sequence=2)  # 850: 85 %
    assert _budget_events(budget) == ["budget.warning"]
    _usage(agent_client, tokens=100, sequence=3)  # 950
    _usage(agent_client, tokens=100, sequence=4)  # 1050
    _usage(agent_client, tokens=100, sequence=5)

    assert sorted(_budget_events(budget)) == ["budget.exceeded", "budget.warning"]
    budget.refresh_from_db()
    assert budget.warned_at is not None and budget.exceeded_at is not None
    warning = Event.objects.get(name="budget.warning")
    assert warning.payload["spent_tokens"] == 850 and warning.payload["scope"] == budget.scope


def test_a_dollar_limit_counts_cost_and_usage_of_yesterday_is_not_todays(agent_client, work):
    budget = Budget.objects.create(scope=Scope.DAY, limit_usd="0.05")
    yesterday = int((timezone.now() - dt.timedelta(days=1)).timestamp() * 1e9)
    old = p.claude_api_request(SID, sequence=1, cost_usd=1.0, time_unix_nano=yesterday)
    agent_client.post(LOGS, data=p.as_json(p.logs_json(old)), content_type="application/json")
    assert _budget_events(budget) == []
    for n in range(2, 7):  # 5 x $0.01
        _usage(agent_client, tokens=1, sequence=n)
    assert sorted(_budget_events(budget)) == ["budget.exceeded", "budget.warning"]


def test_another_agents_usage_counts_against_no_budget_of_this_agent(other_client, work):
    budget = budget_for("agent", work, limit_tokens=100)
    SessionFactory(agent=other_client.agent, id="other-sess")
    _usage(other_client, tokens=5000, sequence=1, session_id="other-sess")
    assert _budget_events(budget) == []


# --- PreToolUse: the verdict and the wait -------------------------------------------------------------------
def _exceed(level: str, work: AgentSession, agent_client) -> Budget:
    budget = budget_for(level, work, limit_tokens=100)
    _usage(agent_client, tokens=150, sequence=99)
    budget.refresh_from_db()
    assert budget.exceeded_at is not None
    return budget


def _tool_use(agent_client, call_id: str):
    return agent_client.post(
        f"/api/v1/sessions/{SID}/tool-calls/",
        {"id": call_id, "tool_name": "Bash", "input": {"command": "make test"}},
        format="json",
    )


def test_no_budget_no_verdict(agent_client, work):
    response = _tool_use(agent_client, "toolu_1")
    assert response.status_code == 201
    assert "budget" not in response.json()


@pytest.mark.parametrize("level", LEVELS)
def test_an_exceeded_budget_makes_the_tool_use_wait_for_a_person(agent_client, work, level):
    budget = _exceed(level, work, agent_client)

    first = _tool_use(agent_client, "toolu_1")
    second = _tool_use(agent_client, "toolu_2")

    assert first.status_code == 201
    verdict = first.json()["budget"]
    assert verdict["exceeded"] is True and verdict["budget"] == budget.pk
    assert verdict["question"] == "budget exceeded: raise it or stop"
    assert "Budget exceeded" in verdict["reason"] and "100 tokens" in verdict["reason"]
    assert second.json()["budget"]["request_id"] == verdict["request_id"]  # one question while it waits
    work.refresh_from_db()
    assert work.status == AgentSession.Status.WAITING_FOR_INPUT
    question = StreamEvent.objects.get(session=work, client_id=verdict["request_id"])
    assert question.payload["choices"] == ["allow", "deny"] and question.payload["budget"] == budget.pk
    waiting = agent_client.get(f"/api/v1/sessions/{SID}/input-requests/{verdict['request_id']}/?wait=0")
    assert waiting.status_code == 200 and waiting.json()["answered"] is False


def test_raising_the_budget_answers_allow_and_the_work_goes_on(agent_client, staff_client, work):
    budget = _exceed("task", work, agent_client)
    request_id = _tool_use(agent_client, "toolu_1").json()["budget"]["request_id"]

    response = staff_client.patch(f"/api/v1/budgets/{budget.pk}/", {"limit_tokens": 1000}, format="json")

    assert response.status_code == 200 and response.json()["state"] == "ok"
    budget.refresh_from_db()
    assert budget.exceeded_at is None and budget.warned_at is None
    assert "budget.raised" in _budget_events(budget)
    work.refresh_from_db()
    assert work.status == AgentSession.Status.RUNNING
    answer = agent_client.get(f"/api/v1/sessions/{SID}/input-requests/{request_id}/?wait=0").json()
    assert answer["answered"] is True and answer["decision"] == "allow"
    assert "budget" not in _tool_use(agent_client, "toolu_2").json()


def test_a_raise_still_below_the_spend_keeps_it_stopped(agent_client, staff_client, work):
    budget = _exceed("agent", work, agent_client)
    _tool_use(agent_client, "toolu_1")

    response = staff_client.patch(f"/api/v1/budgets/{budget.pk}/", {"limit_tokens": 120}, format="json")

    assert response.json()["state"] == "exceeded"
    assert "budget.raised" not in _budget_events(budget)
    work.refresh_from_db()
    assert work.status == AgentSession.Status.WAITING_FOR_INPUT


# --- claim-next -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("level", ["agent", "day", "agent-day"])
def test_claim_next_hands_a_stopped_agent_nothing_and_says_why(agent_client, work, level):
    _exceed(level, work, agent_client)
    ready = TaskFactory(title="Next")

    response = agent_client.post("/api/v1/tasks/claim-next/", {}, format="json")

    assert response.status_code == 409
    assert "handed no new task" in response.json()["message"] and "Budget exceeded" in response.json()["message"]
    ready.refresh_from_db()
    assert ready.status == Task.Status.READY and ready.assignee_id is None


def test_claim_next_skips_the_tasks_of_a_stopped_campaign_and_of_a_stopped_task(agent_client, work, other_client):
    _exceed("campaign", work, agent_client)
    stopped = TaskFactory(title="In the campaign", campaign=work.task.campaign, priority=Task.Priority.P0)
    capped = TaskFactory(title="Its own budget spent", priority=Task.Priority.P0)
    Budget.objects.create(scope=Scope.TASK, task=capped, limit_usd=1, exceeded_at=timezone.now())
    free = TaskFactory(title="Elsewhere", priority=Task.Priority.P3)

    response = other_client.post("/api/v1/tasks/claim-next/", {}, format="json")

    assert response.status_code == 200, response.content
    assert response.json()["id"] == free.pk
    named = other_client.post("/api/v1/tasks/claim-next/", {"campaign": stopped.campaign_id}, format="json")
    assert named.status_code == 409 and "budget is exceeded" in named.json()["message"]
    stopped.refresh_from_db()
    capped.refresh_from_db()
    assert stopped.status == capped.status == Task.Status.READY


def test_after_a_raise_claim_next_hands_work_again(agent_client, staff_client, work):
    budget = _exceed("agent", work, agent_client)
    ready = TaskFactory(title="Next")
    assert agent_client.post("/api/v1/tasks/claim-next/", {}, format="json").status_code == 409

    staff_client.patch(f"/api/v1/budgets/{budget.pk}/", {"limit_tokens": 10_000}, format="json")

    response = agent_client.post("/api/v1/tasks/claim-next/", {}, format="json")
    assert response.status_code == 200 and response.json()["id"] == ready.pk


# --- webhooks ----------------------------------------------------------------------------------------------
def test_budget_warning_is_delivered_to_a_webhook(agent_client, work, settings):
    settings.WEBHOOK_TIMEOUT_SECONDS = 2
    receiver = Receiver()
    try:
        webhook_subscribe(url=receiver.url, secret="s3cret", event_names=["budget.warning"])
        budget = budget_for("task", work, limit_usd="0.05")
        for n in range(1, 5):  # $0.04: 80 %
            _usage(agent_client, tokens=1, sequence=n)
        event = Event.objects.get(name="budget.warning")
        webhook_deliveries_create(event_id=event.pk)

        outcome = webhook_deliver(delivery_id=WebhookDelivery.objects.get(event=event).pk)

        assert outcome == "succeeded"
        sent = json.loads(receiver.received[0].body)
        assert receiver.received[0].headers["x-switchyard-event"] == "budget.warning"
        assert sent["subject"] == {"type": "budget", "id": str(budget.pk)}
        assert sent["payload"]["task"] == work.task_id and sent["payload"]["limit_usd"] == "0.0500"
        assert sent["payload"]["spent_usd"].startswith("0.04")
    finally:
        receiver.stop()


# --- the card ----------------------------------------------------------------------------------------------
def _card(task: Task) -> str:
    listed = board_task_list().get(pk=task.pk)
    return card_html(listed, task_url_prefix="/tasks/")


def test_the_card_shows_the_warning_then_the_exceeded_banner(agent_client, work):
    budget = budget_for("task", work, limit_tokens=1000)
    assert "Budget" not in _card(work.task)
    _usage(agent_client, tokens=850, sequence=1)
    assert "Budget at 80 %" in _card(work.task)
    _usage(agent_client, tokens=200, sequence=2)
    assert "Budget exceeded" in _card(work.task)
    budget.delete()
    assert "Budget" not in _card(work.task)


def test_the_panel_shows_the_banner_and_a_product_owner_raises_the_budget(client, agent_client, work):
    work.task.title = "<script>alert(1)</script>"
    work.task.save(update_fields=["title"])
    budget = _exceed("task", work, agent_client)
    request_id = _tool_use(agent_client, "toolu_1").json()["budget"]["request_id"]
    client.force_login(user_in(PRODUCT_OWNERS, username="po"))

    panel = client.get(f"/tasks/{work.task_id}/", HTTP_HX_REQUEST="true")
    assert panel.status_code == 200
    html = panel.content.decode()
    assert "Budget exceeded (task): new tool use waits for input — raise it or stop." in html
    assert "Raise budget" in html
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;" in html

    raised = client.post(
        f"/tasks/{work.task_id}/budget/",
        {"budget": str(budget.pk), "limit_tokens": "5000", "limit_usd": ""},
        HTTP_HX_REQUEST="true",
    )

    assert raised.status_code == 200
    assert "Budget raised: the work goes on." in raised.content.decode()
    budget.refresh_from_db()
    assert budget.limit_tokens == 5000 and budget.exceeded_at is None
    answer = agent_client.get(f"/api/v1/sessions/{SID}/input-requests/{request_id}/?wait=0").json()
    assert answer["decision"] == "allow" and answer["answered_by"] == "po"


def test_the_panel_form_refuses_a_bad_limit_and_changes_nothing(client, work):
    client.force_login(user_in(PRODUCT_OWNERS, username="po"))

    response = client.post(f"/tasks/{work.task_id}/budget/", {"limit_tokens": "lots"}, HTTP_HX_REQUEST="true")

    assert response.status_code == 200
    assert "The token limit must be a number above zero" in response.content.decode()
    assert not Budget.objects.exists()


def test_a_subagents_tool_use_waits_on_its_main_sessions_task_budget(agent_client, work):
    _exceed("task", work, agent_client)
    child = SessionFactory(agent=work.agent, id=f"{SID}.sub-1", parent=work, status=AgentSession.Status.RUNNING)

    response = agent_client.post(
        f"/api/v1/sessions/{child.pk}/tool-calls/", {"id": "toolu_sub", "tool_name": "Grep"}, format="json"
    )

    verdict = response.json()["budget"]
    assert verdict["scope"] == "task" and verdict["task"] == work.task_id
    child.refresh_from_db()
    assert child.status == AgentSession.Status.WAITING_FOR_INPUT
    assert StreamEvent.objects.get(session=child, client_id=verdict["request_id"]).payload["tool_name"] == "Grep"


def test_an_ended_session_takes_no_tool_use_and_asks_nothing(agent_client, work):
    _exceed("agent", work, agent_client)
    AgentSession.objects.filter(pk=SID).update(status=AgentSession.Status.COMPLETED)

    response = _tool_use(agent_client, "toolu_late")

    assert response.status_code == 409
    assert not StreamEvent.objects.filter(session=work, payload__has_key="budget").exists()
