"""Usage on the pages: the card badge, the session page's usage block and subagent tree, the
agents page's chart, campaign spend and the admin's totals."""

import datetime as dt
import re
from decimal import Decimal

import pytest
from django.test import Client
from django.utils import timezone

from board.models import Task
from config.pages import ENGINEERS, PRODUCT_OWNERS
from ledger.models import ToolInvocation
from tests.factories import AgentFactory, CampaignFactory, SessionFactory, TaskFactory, ToolCallFactory
from tests.page_users import user_in
from usage.models import UsageRecord
from usage.pages.charts import HEIGHT, PLOT_TOP, usage_chart
from usage.pages.selectors import Totals, chart_days

pytestmark = pytest.mark.django_db

SESSION_PAGE_QUERIES = 13  # the detail page as a whole; what matters is that it is the same for 1 and 8
HOSTILE = '<img src=x onerror="alert(1)">'
_keys = iter(range(10**6))


@pytest.fixture
def engineer_client() -> Client:
    client = Client()
    client.force_login(user_in(ENGINEERS, username="eng"))
    return client


def _usage(agent, *, session=None, task=None, model="claude-sonnet-4-5", tokens=(0, 0), cost="0", when=None):
    return UsageRecord.objects.create(
        agent=agent,
        session=session,
        task=task,
        model=model,
        input_tokens=tokens[0],
        output_tokens=tokens[1],
        cache_read_tokens=5000,
        cost_usd=Decimal(cost),
        occurred_at=when or timezone.now(),
        source=UsageRecord.Source.OTLP_LOG,
        idempotency_key=f"k{next(_keys)}",
    )


def _card(html: str, task: Task) -> str:
    return re.search(
        rf'<li class="task-card[^"]*" id="task-{task.pk}".*?</li>\s*(?=<li class="task-card|</ol>|$)', html, re.S
    )[0]


# --- cards ----------------------------------------------------------------------------------------------------
def test_a_card_shows_tokens_and_cost_only_when_its_task_has_usage(engineer_client):
    agent = AgentFactory(slug="claude-1")
    spent = TaskFactory(title="Spent")
    idle = TaskFactory(title="Idle")
    _usage(agent, task=spent, tokens=(12_000, 300), cost="0.40")
    _usage(agent, task=spent, tokens=(0, 0), cost="0.02")

    html = engineer_client.get("/").content.decode()

    assert "12.3k tok · $0.42" in _card(html, spent)
    assert "badge usage" not in _card(html, idle)


def test_a_cards_badge_follows_new_usage(engineer_client):
    agent = AgentFactory(slug="claude-1")
    task = TaskFactory(title="Growing")
    _usage(agent, task=task, tokens=(900, 0), cost="0.10")
    first = engineer_client.get("/").content.decode()

    _usage(agent, task=task, tokens=(2_000, 0), cost="1.00")
    second = engineer_client.get("/").content.decode()

    assert "900 tok · $0.10" in _card(first, task)
    assert "2.9k tok · $1.10" in _card(second, task)


@pytest.mark.parametrize("n", [3, 30])
def test_the_board_costs_the_same_queries_however_many_cards_have_usage(engineer_client, django_assert_num_queries, n):
    agent = AgentFactory(slug="claude-1")
    for i in range(n):
        _usage(agent, task=TaskFactory(title=f"Card {i}"), tokens=(100, i), cost="0.01")

    # session, user, groups (page access), tasks with their usage, agents, campaigns
    with django_assert_num_queries(6):
        response = engineer_client.get("/")

    assert response.content.decode().count('class="badge usage"') == n


# --- the session page ---------------------------------------------------------------------------------------
@pytest.fixture
def tree():
    agent = AgentFactory(slug="claude-1")
    main = SessionFactory(agent=agent, id="main-1")
    explorer = SessionFactory(
        agent=agent, id="main-1:a1", parent=main, metadata={"agent_type": "Explore"}, intent="Explore the repo"
    )
    hostile = SessionFactory(agent=agent, id="main-1:a2", parent=main, metadata={"agent_type": HOSTILE}, intent=HOSTILE)
    ToolCallFactory(session=main, tool_name="MainTool")
    ToolCallFactory(session=explorer, tool_name="Grep", input_summary="pattern: TODO")
    ToolCallFactory(session=explorer, tool_name="Read", input_summary="file: a.py")
    ToolCallFactory(session=hostile, tool_name="Bash", input_summary=HOSTILE, status=ToolInvocation.Status.RUNNING)
    _usage(agent, session=main, model="claude-opus-4-1", tokens=(1000, 200), cost="1.50")
    _usage(agent, session=explorer, model="claude-haiku-4-5", tokens=(3000, 100), cost="0.25")
    _usage(agent, session=SessionFactory(agent=agent, id="elsewhere"), tokens=(9, 9), cost="9")
    return {"main": main, "explorer": explorer, "hostile": hostile}


def _details(html: str, n: int) -> str:
    return re.search(rf'<li class="tree-child" id="subagent-{n}">(.*?)</li>', html, re.S)[1]


def test_the_session_page_shows_the_subagent_tree_with_each_ones_tool_calls(engineer_client, tree):
    html = engineer_client.get("/sessions/main-1/").content.decode()

    explorer, hostile = _details(html, 1), _details(html, 2)
    assert "Explore" in explorer and "2 tool calls" in explorer
    assert "Grep" in explorer and "Read" in explorer and "Bash" not in explorer
    assert 'href="/sessions/main-1:a1/"' in explorer
    assert "1 tool call" in hostile and "Bash" in hostile and "Grep" not in hostile
    assert "MainTool" not in explorer + hostile
    assert "<details>" in explorer and "status-running" in hostile
    assert HOSTILE not in html
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in hostile


def test_the_session_page_shows_usage_with_its_subagents_per_model_and_per_session(engineer_client, tree):
    html = engineer_client.get("/sessions/main-1/").content.decode()

    block = re.search(r'<section class="card usage-block".*?</section>', html, re.S)[0]
    assert "<dd>$1.75</dd>" in block  # 1.50 + 0.25; the unrelated session's $9 is not in it
    assert '<dd title="4000">4k</dd>' in block  # tokens in
    assert "Includes this session's subagents." in block
    assert re.search(r"claude-opus-4-1</code></td><td[^>]*>1.2k</td><td class=\"num\">\$1.50", block)
    assert re.search(r"claude-haiku-4-5</code></td><td[^>]*>3.1k</td><td class=\"num\">\$0.25", block)
    assert '<a href="/sessions/main-1:a1/">Explore</a>' in block


def test_a_subagents_page_counts_its_own_usage_only(engineer_client, tree):
    html = engineer_client.get("/sessions/main-1:a1/").content.decode()

    block = re.search(r'<section class="card usage-block".*?</section>', html, re.S)[0]
    assert "<dd>$0.25</dd>" in block
    assert "Includes this session" not in block
    assert 'id="subagents-h"' not in html  # no children: no tree


def test_a_session_without_usage_says_so(engineer_client):
    SessionFactory(id="quiet")

    html = engineer_client.get("/sessions/quiet/").content.decode()

    assert "No usage reported." in html


# --- the agents page ----------------------------------------------------------------------------------------
def test_the_chart_scales_cost_bars_and_token_points_to_their_peaks():
    days = chart_days(today=dt.date(2026, 11, 26))
    per_day = {
        days[0]: Totals(input_tokens=500, cost_usd=Decimal("2.00"), requests=1),
        days[10]: Totals(input_tokens=1000, output_tokens=1000, cost_usd=Decimal("0.50"), requests=2),
        days[-1]: Totals(cost_usd=Decimal("1.00"), requests=1),
    }

    chart = usage_chart(days=days, per_day=per_day)

    plot = HEIGHT - PLOT_TOP
    assert [m.day for m in chart.marks] == [days[0], days[10], days[-1]]
    assert [m.bar_height for m in chart.marks] == [plot, plot / 4, plot / 2]
    assert [m.bar_y for m in chart.marks] == [HEIGHT - plot, HEIGHT - plot / 4, HEIGHT - plot / 2]
    assert [m.cy for m in chart.marks] == [HEIGHT - plot / 4, PLOT_TOP, HEIGHT]
    assert chart.peak_cost == Decimal("2.00") and chart.peak_tokens == 2000
    assert len(chart.line.split()) == 30
    assert chart.total.cost_usd == Decimal("3.50") and chart.total.tokens == 2500


def test_the_agents_page_draws_a_bar_and_a_point_per_day_with_usage(engineer_client, django_assert_num_queries):
    agent = AgentFactory(slug="claude-1")
    quiet = AgentFactory(slug="quiet")
    now = timezone.now()
    _usage(agent, tokens=(100, 0), cost="0.10", when=now - dt.timedelta(days=2))
    _usage(agent, tokens=(300, 100), cost="0.30", when=now - dt.timedelta(days=2))
    _usage(agent, tokens=(100, 0), cost="0.40", when=now - dt.timedelta(days=9))
    _usage(agent, tokens=(0, 0), cost="0.05", when=now)
    _usage(agent, tokens=(999_999, 0), cost="99", when=now - dt.timedelta(days=45))  # outside the 30 days

    html = engineer_client.get("/agents/").content.decode()

    figure = re.search(rf'id="agent-{agent.pk}".*?<figure class="usage-chart">(.*?)</figure>', html, re.S)[1]
    heights = [float(h) for h in re.findall(r'<rect class="cost-bar" [^>]*height="([\d.]+)"', figure)]
    points = re.findall(r'<circle class="token-point" cx="[\d.]+" cy="([\d.]+)"', figure)
    plot = HEIGHT - PLOT_TOP
    assert heights == [plot, plot, plot / 8]  # $0.40 twice (the peak), $0.05 today
    assert [float(y) for y in points] == [HEIGHT - plot / 5, PLOT_TOP]  # 100 then 500 tokens; none today
    assert "$0.85" in figure and "$99" not in figure
    quiet_figure = re.search(rf'id="agent-{quiet.pk}".*?<figure class="usage-chart">(.*?)</figure>', html, re.S)[1]
    assert "No usage reported in the last 30 days." in quiet_figure


# --- campaigns ----------------------------------------------------------------------------------------------
def test_campaign_progress_shows_what_its_tasks_spent(client):
    client.force_login(user_in(PRODUCT_OWNERS))
    agent = AgentFactory(slug="claude-1")
    spending = CampaignFactory(name="Spending")
    CampaignFactory(name="Quiet")
    _usage(agent, task=TaskFactory(campaign=spending), tokens=(1000, 500), cost="1.25")
    _usage(agent, task=TaskFactory(campaign=spending), tokens=(1000, 0), cost="0.25")
    _usage(agent, task=TaskFactory(), tokens=(1, 1), cost="7")  # no campaign

    html = client.get("/campaigns/").content.decode()

    assert f'id="campaign-{spending.pk}-progress"' in html
    assert "Spent $1.50 · 2.5k tokens" in html
    assert html.count("No spend reported") == 1


# --- the admin ------------------------------------------------------------------------------------------------
def test_the_usage_list_shows_the_totals_of_its_filtered_rows(staff_client, tree):
    everything = staff_client.get("/admin/usage/usagerecord/").content.decode()
    haiku = staff_client.get("/admin/usage/usagerecord/", {"model": "claude-haiku-4-5"}).content.decode()
    by_session = staff_client.get("/admin/usage/usagerecord/", {"session": "main-1"}).content.decode()

    assert '<th scope="row">All</th><th>$10.75</th>' in everything
    assert '<th scope="row">All</th><th>$0.25</th>' in haiku
    assert '<th scope="row">All</th><th>$1.50</th>' in by_session


def test_session_task_and_agent_change_pages_show_usage_totals(staff_client, tree):
    agent = tree["main"].agent
    task = TaskFactory()
    _usage(agent, task=task, tokens=(70, 7), cost="0.07")

    session_page = staff_client.get("/admin/sessions_app/agentsession/main-1/change/").content.decode()
    task_page = staff_client.get(f"/admin/board/task/{task.pk}/change/").content.decode()
    agent_page = staff_client.get(f"/admin/sessions_app/agent/{agent.pk}/change/").content.decode()

    assert "$1.75 · 4000 tokens in, 300 out" in session_page and "(with its subagents)" in session_page
    assert "?session=main-1" in session_page
    assert "$0.07 · 70 tokens in, 7 out" in task_page
    assert "$10.82 · " in agent_page


@pytest.mark.parametrize("children", [1, 8])
def test_the_session_pages_queries_do_not_grow_with_subagents(engineer_client, django_assert_num_queries, children):
    agent = AgentFactory(slug="claude-1")
    main = SessionFactory(agent=agent, id="main-q")
    for n in range(children):
        child = SessionFactory(agent=agent, id=f"main-q:a{n}", parent=main, metadata={"agent_type": "Explore"})
        ToolCallFactory(session=child)
        ToolCallFactory(session=child)
        _usage(agent, session=child, tokens=(10, 1), cost="0.01")

    # The tree is two queries (children with their counts, their first calls) and the usage block one,
    # however many subagents there are.
    with django_assert_num_queries(SESSION_PAGE_QUERIES):
        response = engineer_client.get("/sessions/main-q/")

    assert response.content.decode().count('class="tree-child"') == children
