"""The budget banner on the board's card (usage/budget_pages.py, templates/usage/_card_budget.html): at
80 % "Budget at 80 %", at 100 % "Budget exceeded", one line for each level that applies to the card's
task — its own budget, its campaign's, its agent's and the day's (all agents, or the agent working the
card) — with the usage arriving by OTLP, pushed live to open boards, names escaped."""

import datetime as dt
import json
import re

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client
from django.utils import timezone

from board.cards import card_html
from board.models import Task
from board.selectors import board_task_list
from config.asgi import application
from tests.board.board_helpers import product_owner
from tests.factories import AgentFactory, CampaignFactory, TaskFactory
from tests.usage import payloads as p
from tests.usage.budget_helpers import budget_for, work_session
from tests.worker import WS_TIMEOUT
from usage.models import Budget

Scope = Budget.Scope
SID = "5d1e9a3c-7b2f-4c8e-a1d0-3f6b9e2c8a47"
LEVELS = {
    "task": "this task",
    "campaign": "campaign Launch",
    "agent": "agent claude-1",
    "day": "today, all agents",
    "agent-day": "today, claude-1",
}


def _usage(client, *, tokens: int, sequence: int) -> None:
    record = p.claude_api_request(
        SID,
        sequence=sequence,
        input_tokens=tokens,
        output_tokens=0,
        cost_usd=0.01,
        time_unix_nano=int(timezone.now().timestamp() * 1e9),
    )
    response = client.post("/api/v1/otlp/v1/logs", data=p.as_json(p.logs_json(record)), content_type="application/json")
    assert response.status_code == 200, response.content


@pytest.fixture
def work(agent):
    return work_session(agent, session_id=SID)


def _card(task: Task) -> str:
    return card_html(board_task_list().get(pk=task.pk), task_url_prefix="/tasks/")


def _banner(html: str) -> list[str]:
    """The banner's lines as text: ``exceeded|Budget exceeded this task``."""
    lines = re.findall(r'<li class="budget-(\w+)"[^>]*>(.*?)</li>', html)
    return [f"{kind}|{re.sub(r'<[^>]+>', '', text)}" for kind, text in lines]


@pytest.mark.django_db
@pytest.mark.parametrize("level", list(LEVELS))
def test_each_level_shows_its_warning_then_its_exceeded_line(agent_client, work, level):
    budget_for(level, work, limit_tokens=1000)
    assert _banner(_card(work.task)) == [] and "card-budget" not in _card(work.task)

    _usage(agent_client, tokens=850, sequence=1)
    assert _banner(_card(work.task)) == [f"warning|Budget at 80 % {LEVELS[level]}"]

    _usage(agent_client, tokens=200, sequence=2)
    assert _banner(_card(work.task)) == [f"exceeded|Budget exceeded {LEVELS[level]}"]


@pytest.mark.django_db
def test_every_level_that_applies_has_its_line_exceeded_first(agent_client, work):
    budget_for("task", work, limit_tokens=1000)  # 90 %: warning
    budget_for("campaign", work, limit_tokens=800)  # exceeded
    budget_for("day", work, limit_tokens=5000)  # 18 %: nothing
    budget_for("agent-day", work, limit_tokens=900)  # exceeded
    _usage(agent_client, tokens=900, sequence=1)

    assert _banner(_card(work.task)) == [
        "exceeded|Budget exceeded campaign Launch",
        "exceeded|Budget exceeded today, claude-1",
        "warning|Budget at 80 % this task",
    ]


@pytest.mark.django_db
def test_the_agents_and_the_days_budgets_show_on_the_work_under_way_only(agent, work):
    now = timezone.now()
    budget_for("agent", work, limit_tokens=10, warned_at=now, exceeded_at=now)
    budget_for("day", work, limit_tokens=10, warned_at=now)
    done = TaskFactory(title="Done earlier", status=Task.Status.DONE, assignee=agent)
    ready = TaskFactory(title="Next")
    someone_elses = TaskFactory(title="Theirs", status=Task.Status.IN_PROGRESS, assignee=AgentFactory(slug="codex-9"))

    assert _banner(_card(work.task)) == [
        "exceeded|Budget exceeded agent claude-1",
        "warning|Budget at 80 % today, all agents",
    ]
    assert _banner(_card(someone_elses)) == ["warning|Budget at 80 % today, all agents"]
    assert _banner(_card(done)) == _banner(_card(ready)) == []


@pytest.mark.django_db
def test_the_campaigns_budget_shows_on_its_open_cards_and_a_day_of_yesterday_on_none(agent, work):
    now = timezone.now()
    yesterday = now - dt.timedelta(days=1)
    budget_for("campaign", work, limit_usd=1, warned_at=now, exceeded_at=now)
    budget_for("day", work, limit_usd=1, warned_at=yesterday, exceeded_at=yesterday)
    ready = TaskFactory(title="Next in it", campaign=work.task.campaign)
    done = TaskFactory(title="Shipped", campaign=work.task.campaign, status=Task.Status.DONE)

    assert _banner(_card(ready)) == _banner(_card(work.task)) == ["exceeded|Budget exceeded campaign Launch"]
    assert _banner(_card(done)) == []


@pytest.mark.django_db
def test_names_in_the_banner_are_escaped(agent):
    hostile = AgentFactory(slug='<img src=x onerror="alert(1)">')
    campaign = CampaignFactory(name='<script>alert("c")</script> & "Q3"')
    task = TaskFactory(title="Hostile", campaign=campaign, status=Task.Status.IN_PROGRESS, assignee=hostile)
    now = timezone.now()
    Budget.objects.create(scope=Scope.CAMPAIGN, campaign=campaign, limit_tokens=10, warned_at=now, exceeded_at=now)
    Budget.objects.create(scope=Scope.AGENT, agent=hostile, limit_tokens=10, warned_at=now)

    html = _card(task)

    banner = html[html.index('<ul class="card-budget"') :]
    assert "<script>" not in banner and "<img" not in banner
    assert "campaign &lt;script&gt;alert(&quot;c&quot;)&lt;/script&gt; &amp; &quot;Q3&quot;" in banner
    assert "agent &lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in banner


@pytest.mark.django_db
def test_the_board_page_shows_the_banner_in_the_same_number_of_queries(client, agent, work, django_assert_num_queries):
    """The banner's levels are subqueries of the board's one card query: more cards, same queries."""
    now = timezone.now()
    budget_for("day", work, limit_tokens=10, warned_at=now, exceeded_at=now)
    client.force_login(product_owner())
    client.get("/")  # warm: the session, the user's groups

    def queries_for_board() -> int:
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        with CaptureQueriesContext(connection) as captured:
            page = client.get("/")
        assert page.status_code == 200
        assert page.content.decode().count('Budget exceeded</strong> <span class="budget-level">today, all agents') == (
            Task.objects.filter(status=Task.Status.IN_PROGRESS).count()
        )
        return len(captured)

    few = queries_for_board()
    for n in range(5):
        TaskFactory(title=f"More {n}", status=Task.Status.IN_PROGRESS, assignee=AgentFactory(slug=f"a-{n}"))
    assert queries_for_board() == few


# --- pushed live --------------------------------------------------------------------------------------------
def _cookie_for(user) -> tuple[bytes, bytes]:
    client = Client()
    client.force_login(user)
    return (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())


@pytest.mark.django_db(transaction=True)
def test_the_warning_and_the_exceeding_are_pushed_to_an_open_board(agent_client, work):
    """The day budget (all agents): the export's transaction pushes the card with its new banner."""
    budget_for("day", work, limit_tokens=1000)
    cookie = _cookie_for(product_owner())

    async def scenario():
        board = WebsocketCommunicator(
            application, "/ws/board/", headers=[(b"host", b"localhost"), (b"origin", b"http://localhost"), cookie]
        )
        connected, _ = await board.connect(timeout=WS_TIMEOUT)
        assert connected
        assert json.loads(await board.receive_from(timeout=WS_TIMEOUT))["type"] == "hello"

        await database_sync_to_async(_usage)(agent_client, tokens=850, sequence=1)
        warned = await _pushed_card(board, work.task_id)
        assert _banner(warned) == ["warning|Budget at 80 % today, all agents"]

        await database_sync_to_async(_usage)(agent_client, tokens=200, sequence=2)
        exceeded = await _pushed_card(board, work.task_id)
        assert _banner(exceeded) == ["exceeded|Budget exceeded today, all agents"]
        await board.disconnect()

    async_to_sync(scenario)()


async def _pushed_card(board, task_id: int) -> str:
    """The next push's HTML of this card (an export may push other cards first)."""
    for _ in range(5):
        message = json.loads(await board.receive_from(timeout=WS_TIMEOUT))
        if message["type"] == "tasks" and f'id="task-{task_id}"' in message["html"]:
            return message["html"]
    raise AssertionError(f"task {task_id}'s card was not pushed")
