"""Usage in the browser: the card badge, the session page's usage and subagent tree (a subagent
opened to its tool calls), the agents page's chart and campaign spend, as Chromium draws them."""

import datetime as dt
import os
from decimal import Decimal
from pathlib import Path

from django.utils import timezone
from playwright.sync_api import expect

from board.models import Task
from tests.factories import AgentFactory, CampaignFactory, SessionFactory, TaskFactory, ToolCallFactory
from usage.models import UsageRecord

_keys = iter(range(10**6))


def _usage(agent, *, when, session=None, task=None, model="claude-sonnet-4-5", tokens=(0, 0), cost="0"):
    UsageRecord.objects.create(
        agent=agent,
        session=session,
        task=task,
        model=model,
        input_tokens=tokens[0],
        output_tokens=tokens[1],
        cost_usd=Decimal(cost),
        occurred_at=when,
        source=UsageRecord.Source.OTLP_LOG,
        idempotency_key=f"b{next(_keys)}",
    )


def _shot(page, tmp_path: Path, name: str) -> None:
    # USAGE_SHOTS: where a person reviewing the pages wants them; else the test's own folder.
    folder = Path(os.environ.get("USAGE_SHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"{name}.png"), full_page=True)


def test_usage_shows_on_cards_session_tree_agents_chart_and_campaigns(new_page, engineer, tmp_path):
    now = timezone.now()
    agent = AgentFactory(slug="claude-7", display_name="Claude seven", emoji="🤖")
    campaign = CampaignFactory(name="Spring launch")
    task = TaskFactory(title="Write the launch post", status=Task.Status.IN_PROGRESS, assignee=agent, campaign=campaign)
    TaskFactory(title="No usage yet", status=Task.Status.READY)
    main = SessionFactory(agent=agent, id="cc-main", task=task, intent="Write the launch post")
    explorer = SessionFactory(
        agent=agent, id="cc-main:a1", parent=main, metadata={"agent_type": "Explore"}, intent="Explore subagent"
    )
    planner = SessionFactory(agent=agent, id="cc-main:a2", parent=main, metadata={"agent_type": "Plan"})
    ToolCallFactory(session=main, tool_name="Task", input_summary="Explore the docs")
    for name, summary in (("Grep", "pattern: launch"), ("Read", "docs/launch.md"), ("Glob", "**/*.md")):
        ToolCallFactory(session=explorer, tool_name=name, input_summary=summary, status="success", finished_at=now)
    ToolCallFactory(session=planner, tool_name="<b>Bash</b>", input_summary="<script>alert(1)</script>")
    for days_ago, cost, tokens in ((0, "0.42", (9000, 3300)), (1, "1.10", (30000, 4000)), (4, "0.20", (5000, 900))):
        when = now - dt.timedelta(days=days_ago)
        _usage(agent, session=main, task=task, model="claude-opus-4-1", tokens=tokens, cost=cost, when=when)
    _usage(agent, session=explorer, task=task, model="claude-haiku-4-5", tokens=(20000, 800), cost="0.05", when=now)

    page = new_page(engineer, width=1400)

    page.goto("/")
    card = page.locator(f"#task-{task.pk}")
    expect(card.locator(".badge.usage")).to_have_text("73k tok · $1.77")
    expect(page.locator(".badge.usage")).to_have_count(1)
    _shot(page, tmp_path, "board")

    page.goto("/sessions/cc-main/")
    usage = page.locator(".usage-block")
    expect(usage).to_contain_text("$1.77")
    expect(usage).to_contain_text("claude-haiku-4-5")
    tree = page.locator(".session-tree")
    first = tree.locator("details").first
    expect(first.locator("summary")).to_contain_text("Explore")
    expect(first.get_by_text("pattern: launch")).to_be_hidden()
    first.locator("summary").click()
    expect(first.get_by_text("pattern: launch")).to_be_visible()
    second = tree.locator("details").nth(1)
    second.locator("summary").click()
    expect(second).to_contain_text("<script>alert(1)</script>")  # shown as text, not run
    _shot(page, tmp_path, "session")

    page.goto("/agents/")
    chart = page.locator(".usage-chart svg")
    expect(chart.locator("rect.cost-bar")).to_have_count(3)
    expect(chart.locator("circle.token-point")).to_have_count(3)
    _shot(page, tmp_path, "agents")

    page.goto("/campaigns/")
    expect(page.locator(".campaign-spent")).to_contain_text("Spent $1.77")
    _shot(page, tmp_path, "campaigns")

    engineer.is_superuser = True  # the admin's model permissions
    engineer.save(update_fields=["is_superuser"])
    page.goto("/admin/usage/usagerecord/?model=claude-opus-4-1")
    expect(page.locator(".usage-summary")).to_contain_text("$1.72")
    _shot(page, tmp_path, "admin-usage-list")
    page.goto("/admin/sessions_app/agentsession/cc-main/change/")
    expect(page.locator(".usage-admin-totals")).to_contain_text("$1.77")
    _shot(page, tmp_path, "admin-session")
