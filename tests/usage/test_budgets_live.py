"""Budgets that stop spending, live (issue 15 part 4): the app under uvicorn, Claude Code's usage arriving
by OTLP/HTTP, and a real `switchyard hook` process asking PreToolUse at each level (task, agent, campaign,
the all-agents day, the agent's day). Below 100 % the hook goes on at once; at 100 % it waits, and denies
with the reason when nobody raises the budget in time, or goes on when a product owner raises it from the
card panel while it waits."""

import functools
import json
import re
import subprocess
import threading
import time

import httpx
import pytest
from django.test import Client
from django.utils import timezone

from board.models import Task
from config.pages import PRODUCT_OWNERS
from ledger.models import Event, ToolInvocation
from sessions_app.models import Agent, AgentSession
from tests.client.hook_events import FIXTURES, SID
from tests.factories import CampaignFactory, SessionFactory, TaskFactory
from tests.page_users import user_in
from tests.usage import payloads as p
from usage.models import Budget

pytestmark = pytest.mark.django_db(transaction=True)

PRE_TOOL_USE = FIXTURES["PreToolUse"]
Scope = Budget.Scope


@pytest.fixture
def budget_hook(start_hook):
    """`switchyard hook` as Claude Code starts it, with the permission default allow: only a budget denies."""
    return functools.partial(start_hook, SWITCHYARD_PERMISSION_DEFAULT="allow")


def _output(proc: subprocess.Popen, timeout: float = 60) -> tuple[dict | None, str]:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    return (json.loads(out) if out.strip() else None), err


def _otlp(url: str, key: str, *, tokens: int, sequence: int) -> None:
    """Claude Code's exporter posts one api_request of ``tokens`` input tokens, now."""
    record = p.claude_api_request(
        SID,
        sequence=sequence,
        input_tokens=tokens,
        output_tokens=0,
        time_unix_nano=int(timezone.now().timestamp() * 1e9),
    )
    response = httpx.post(
        f"{url}/api/v1/otlp/v1/logs",
        content=p.as_json(p.logs_json(record)),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        timeout=20,
    )
    assert response.status_code == 200, response.text


def _work(level: str) -> Budget:
    """claude-1's session (Claude Code's session id) on a task of a campaign, and a 1000-token budget."""
    agent = Agent.objects.get(slug="claude-1")
    task = TaskFactory(
        title="Ship it", campaign=CampaignFactory(name="Launch"), status=Task.Status.IN_PROGRESS, assignee=agent
    )
    SessionFactory(agent=agent, id=SID, task=task, status=AgentSession.Status.RUNNING)
    target = {
        "task": {"scope": Scope.TASK, "task": task},
        "agent": {"scope": Scope.AGENT, "agent": agent},
        "campaign": {"scope": Scope.CAMPAIGN, "campaign": task.campaign},
        "day": {"scope": Scope.DAY},
        "agent-day": {"scope": Scope.DAY, "agent": agent},
    }[level]
    return Budget.objects.create(**target, limit_tokens=1000)


def _spend_past_warning_then_limit(url: str, key: str, budget: Budget, budget_hook) -> None:
    """85 % by OTLP: a warning, and the hook goes on at once; then 105 %: exceeded."""
    _otlp(url, key, tokens=850, sequence=1)
    assert list(Event.objects.filter(subject_type="budget").values_list("name", flat=True)) == ["budget.warning"]
    started = time.monotonic()
    output, err = _output(budget_hook(PRE_TOOL_USE, url=url, key=key, timeout=30))
    assert output is None, err  # under the limit: no decision, Claude Code goes on
    assert time.monotonic() - started < 10
    _otlp(url, key, tokens=200, sequence=2)
    budget.refresh_from_db()
    assert budget.exceeded_at is not None
    assert Event.objects.filter(name="budget.exceeded", subject_id=str(budget.pk)).count() == 1


def _wait_until_waiting(proc: subprocess.Popen, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if AgentSession.objects.filter(pk=SID, status=AgentSession.Status.WAITING_FOR_INPUT).exists():
            return
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.05)
    raise AssertionError("the session never waited for input")


@pytest.mark.parametrize("level", ["task", "agent", "campaign", "day", "agent-day"])
def test_at_100_percent_the_hook_denies_with_the_reason_when_nobody_raises_it(sy_server, agent_key, budget_hook, level):
    budget = _work(level)
    _spend_past_warning_then_limit(sy_server.url, agent_key, budget, budget_hook)
    started = time.monotonic()

    output, err = _output(
        budget_hook({**PRE_TOOL_USE, "tool_use_id": "toolu_02"}, url=sy_server.url, key=agent_key, timeout=3)
    )

    assert 2.5 <= time.monotonic() - started < 20, err
    decision = output["hookSpecificOutput"]
    assert decision["hookEventName"] == "PreToolUse" and decision["permissionDecision"] == "deny"
    reason = decision["permissionDecisionReason"]
    assert reason.startswith("Budget exceeded (") and "1000 tokens" in reason
    assert reason.endswith("raise it in Switchyard or stop. (nobody raised it within 3 s)")
    # the session still waits on the budget, and the denied call is closed as failed
    assert AgentSession.objects.get(pk=SID).status == AgentSession.Status.WAITING_FOR_INPUT
    call = ToolInvocation.objects.get(session_id=SID, client_id="toolu_02")
    assert call.status == ToolInvocation.Status.FAILURE and "Budget exceeded" in call.error


def _signed_in_product_owner() -> dict:
    person = Client()
    person.force_login(user_in(PRODUCT_OWNERS, username="po"))
    return {"sessionid": person.cookies["sessionid"].value}


def _raise_from_the_card(base_url: str, task_id: int, budget_id: int, cookies: dict) -> httpx.Response:
    """The product owner's browser: the card panel, then its Raise budget form."""
    with httpx.Client(base_url=base_url, cookies=cookies, timeout=20) as browser:
        panel = browser.get(f"/tasks/{task_id}/")
        assert panel.status_code == 200
        assert "Raise budget" in panel.text and "raise it or stop" in panel.text
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', panel.text).group(1)
        return browser.post(
            f"/tasks/{task_id}/budget/",
            data={"csrfmiddlewaretoken": token, "budget": str(budget_id), "limit_tokens": "5000", "limit_usd": ""},
            headers={"Referer": f"{base_url}/tasks/{task_id}/", "HX-Request": "true"},
        )


@pytest.mark.parametrize("level", ["task", "agent", "campaign", "day"])
def test_a_product_owner_raises_the_budget_from_the_card_and_the_tool_use_goes_on(
    sy_server, agent_key, budget_hook, level
):
    # given usage by OTLP past the budget, and a hook asking PreToolUse, waiting
    budget = _work(level)
    _spend_past_warning_then_limit(sy_server.url, agent_key, budget, budget_hook)
    proc = budget_hook({**PRE_TOOL_USE, "tool_use_id": "toolu_03"}, url=sy_server.url, key=agent_key, timeout=40)
    _wait_until_waiting(proc)
    time.sleep(0.3)
    assert proc.poll() is None
    cookies = _signed_in_product_owner()
    task_id = AgentSession.objects.get(pk=SID).task_id

    # when a product owner raises it from the card panel, from another thread
    raised = {}
    person = threading.Thread(
        target=lambda: raised.update(response=_raise_from_the_card(sy_server.url, task_id, budget.pk, cookies)),
        daemon=True,
    )
    sent_at = time.monotonic()
    person.start()
    output, err = _output(proc)
    took = time.monotonic() - sent_at
    person.join(10)

    # then the hook goes on (no decision: Claude Code proceeds as it would have), soon after the raise
    assert raised["response"].status_code == 200
    assert "Budget raised: the work goes on." in raised["response"].text
    assert output is None, err
    assert took < 10, err
    assert AgentSession.objects.get(pk=SID).status == AgentSession.Status.RUNNING
    budget.refresh_from_db()
    assert budget.limit_tokens == 5000 and budget.exceeded_at is None
    assert Event.objects.filter(name="budget.raised", subject_id=str(budget.pk)).count() == 1
    assert ToolInvocation.objects.get(session_id=SID, client_id="toolu_03").status == ToolInvocation.Status.RUNNING
