"""The card's budget banner as Chromium draws it: one coloured line per level, the exceeded ones first,
a hostile campaign name shown as text; the panel opened from the card raises the budget and the banner
goes (tests/browser's Playwright fixtures)."""

import os
from decimal import Decimal
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from board.models import Task
from tests.browser.conftest import browser_type, engineer, file_roots, live_app, module_app, new_page  # noqa: F401
from tests.factories import AgentFactory, CampaignFactory, TaskFactory
from usage.models import Budget, UsageRecord

pytestmark = pytest.mark.browser
Scope = Budget.Scope


def _shot(page, tmp_path: Path, name: str) -> None:
    # BUDGET_SHOTS: where a person reviewing the banner wants them; else the test's own folder.
    folder = Path(os.environ.get("BUDGET_SHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"{name}.png"), full_page=True)


def test_the_banner_shows_each_level_and_goes_when_the_budget_is_raised(new_page, engineer, tmp_path):  # noqa: F811
    now = timezone.now()
    agent = AgentFactory(slug="claude-7", display_name="Claude seven", emoji="🤖")
    campaign = CampaignFactory(name='Spring <b>launch</b> & "more"')
    working = TaskFactory(
        title="Write the launch post", status=Task.Status.IN_PROGRESS, assignee=agent, campaign=campaign
    )
    waiting = TaskFactory(title="Translate the post", status=Task.Status.READY, campaign=campaign)
    TaskFactory(title="Unrelated", status=Task.Status.READY)
    # What Claude Code reported (by OTLP, elsewhere): $6 and 8,500 tokens on the task, today.
    UsageRecord.objects.create(
        agent=agent,
        task=working,
        model="claude-opus-4-1",
        input_tokens=8000,
        output_tokens=500,
        cost_usd=Decimal("6"),
        occurred_at=now,
        source=UsageRecord.Source.OTLP_LOG,
        idempotency_key="budget-browser-1",
    )
    Budget.objects.create(scope=Scope.TASK, task=working, limit_tokens=10_000, warned_at=now)  # 85 %
    Budget.objects.create(scope=Scope.CAMPAIGN, campaign=campaign, limit_usd=5, warned_at=now, exceeded_at=now)
    Budget.objects.create(scope=Scope.DAY, limit_usd=7, warned_at=now)  # 86 %
    page = new_page(engineer, width=1400)

    page.goto("/")
    card = page.locator(f"#task-{working.pk}")
    lines = card.locator(".card-budget li")
    expect(lines).to_have_count(3)
    expect(lines.nth(0)).to_have_text('Budget exceeded campaign Spring <b>launch</b> & "more"')
    expect(lines.nth(0)).to_have_class("budget-exceeded")
    expect(lines.nth(1)).to_have_text("Budget at 80 % this task")
    expect(lines.nth(2)).to_have_text("Budget at 80 % today, all agents")
    expect(card.locator(".card-budget b")).to_have_count(0)  # the name is text, not markup
    assert lines.nth(0).evaluate("el => getComputedStyle(el).backgroundColor") == "rgb(253, 236, 234)"
    assert lines.nth(1).evaluate("el => getComputedStyle(el).backgroundColor") == "rgb(255, 244, 224)"
    expect(page.locator(f"#task-{waiting.pk} .card-budget li")).to_have_text(
        'Budget exceeded campaign Spring <b>launch</b> & "more"'
    )
    expect(page.locator(".card-budget")).to_have_count(2)
    card.scroll_into_view_if_needed()
    _shot(page, tmp_path, "budget-banner-board")
    card.screenshot(path=str(Path(os.environ.get("BUDGET_SHOTS") or tmp_path) / "budget-banner-card.png"))

    card.locator(".card-title").click()
    box = page.locator(f"#task-budget-{working.pk}")
    expect(box).to_contain_text("Budget exceeded (campaign): new tool use waits for input — raise it or stop.")
    row = box.locator("tr.budget-exceeded")
    row.get_by_label("USD").fill("500")
    row.get_by_role("button", name="Raise budget").click()
    expect(box).to_contain_text("Budget raised: the work goes on.")
    _shot(page, tmp_path, "budget-banner-panel")

    # The raise pushes the cards: the campaign's line goes from both without a reload.
    expect(card.locator(".card-budget li")).to_have_count(2)
    expect(page.locator(f"#task-{waiting.pk} .card-budget")).to_have_count(0)
