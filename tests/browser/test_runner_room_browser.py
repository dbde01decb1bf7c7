"""Runners that fit their machine, in a browser: the Runners page shows each runner's memory and load
and the providers it has no room for; a card whose run waits for memory says so. Desktop and phone."""

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from config.actors import Actor
from runners.models import Runner
from runners.services import run_queue, runner_key_create
from tests.browser.conftest import screenshot
from tests.factories import TaskFactory, UserFactory

MEMORY = {"available_mb": 1300, "total_mb": 16000, "min_free_mb": 1024, "reserved_mb": 0, "needs_mb": {"claude": 512}}


@pytest.mark.parametrize(("width", "height", "tag"), [(1280, 900, "desktop"), (390, 844, "phone")])
def test_memory_on_the_runners_page_and_a_card_waiting_for_room(
    new_page, engineer, transactional_db, width, height, tag
):
    runner = runner_key_create(name="build-1", labels=["linux"], capacity=4)[0]
    Runner.objects.filter(pk=runner.pk).update(
        status="online",
        providers=["demo", "claude"],
        host="build-1.example.internal",
        version="0.2.0",
        last_seen_at=timezone.now() - timedelta(seconds=2),
        room={"claude": 0, "demo": 3},
        memory=MEMORY,
        load=3.5,
    )
    task = TaskFactory(title="Refactor the cart", description="Split it up.")
    run_queue(actor=Actor(user=UserFactory(username="po", is_staff=True)), task=task, provider="claude")
    page = new_page(engineer, width=width, height=height)

    page.goto("/runners/")
    row = page.locator("table.runners tbody tr").first
    expect(row.locator("td.machine")).to_contain_text("1300 / 16000 MB free")
    expect(row.locator("td.machine")).to_contain_text("load 3.50")
    expect(row.locator("td.machine")).to_contain_text("no room for claude")
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    screenshot(page, f"runners_page_memory_{tag}")

    page.goto("/")
    page.locator(f"#task-{task.pk} .card-title").click()
    room = page.locator("#task-panel .run-room")
    expect(room).to_contain_text("Waiting for a runner with room: build-1 offers claude, which needs 512 MB")
    expect(room).to_contain_text("it has 276 MB to spare")
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    screenshot(page, f"runners_card_waiting_for_room_{tag}")
