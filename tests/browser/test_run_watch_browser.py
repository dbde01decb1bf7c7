"""Watching a run from its card, in a real browser, as a product owner (issue 25, "Watch a run"): a
real runner runs the demo agent; while it runs, the card panel shows its conversation (its words,
its plan, its tool calls with their input folded), the raw log one click away and following, and
the elapsed time; an unfolded tool call stays unfolded as the panel redraws; when it ends, the
attempts list. Desktop and 390 x 844, never wider than the screen."""

import contextlib
import re

from django.utils import timezone
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import expect

from runners.models import Run
from runners.services import runner_key_create
from tests.browser.conftest import element_screenshot, screenshot
from tests.browser.test_run_flow_browser import RUNNER, press_run, repository, start_runner, the_run, wait_for  # noqa: F401
from tests.factories import SessionFactory, TaskFactory


def test_an_owner_watches_the_demo_run_live_then_reads_its_attempts(new_page, product_owner, start_runner, repository):  # noqa: F811
    task = TaskFactory(title="Write the onboarding notes", description="Notes for new people.", repository=repository)
    board = new_page(product_owner)
    panel = press_run(board, task)
    watch = panel.locator(f"#run-watch-{task.pk}")
    expect(watch).to_contain_text("Nothing said yet")  # queued: nothing said

    runner = start_runner(speed=0.6)  # ~15 s: long enough to watch
    expect(watch.locator(".watch-stats")).to_contain_text(f"on {RUNNER}", timeout=20_000)
    conversation = watch.locator("ol.conversation")
    expect(conversation).to_contain_text("Demo agent started on task", timeout=20_000)
    read = conversation.locator("li.tool", has_text="Read").first
    expect(read).to_be_visible(timeout=20_000)
    expect(conversation.locator("li.plan .checklist")).to_contain_text("Write notes", timeout=20_000)
    assert the_run(task).is_active, "the conversation was seen only after the run ended"

    # A tool call unfolds to its input, and stays unfolded while the panel redraws every 2 s.
    read.locator("summary").click()
    expect(read.locator(".tool-io")).to_contain_text("file_path")
    board.wait_for_timeout(0)  # let the click land
    with board.expect_response(lambda r: f"/tasks/{task.pk}/watch/" in r.url and r.status == 200):
        pass
    expect(conversation.locator("li.tool", has_text="Read").first.locator(".tool-io")).to_be_visible()

    # The raw log, one click away, following as it grows.
    raw = watch.locator("details.raw-log")
    raw.locator("summary").click()
    text = raw.locator("pre.raw-log-text")
    expect(text).to_contain_text("[demo-agent] starting on task #")
    expect(raw).to_contain_text("following live")
    screenshot(board, "run_watch_1_running_desktop")
    element_screenshot(watch, "run_watch_1_running_desktop_watch")
    expect(text).to_contain_text("[demo-agent] done", timeout=40_000)  # appended, the box never reloaded
    wait_for(lambda: not the_run(task).is_active, timeout=30, what="the run to end", runner=runner)

    # Ended: the attempts list, with the run's outcome; the conversation stays to read.
    attempts = watch.locator("ol.attempts")
    expect(attempts).to_contain_text("Succeeded", timeout=15_000)
    expect(attempts).to_contain_text(f"demo on {RUNNER}")
    expect(conversation).to_contain_text("Demo agent finished")
    screenshot(board, "run_watch_2_ended_desktop")

    # On a phone: the task's page, nothing wider than the screen.
    phone = new_page(product_owner, width=390, height=844)
    phone.goto(f"/tasks/{task.pk}/")
    expect(phone.locator(f"#run-watch-{task.pk} ol.attempts")).to_contain_text("Succeeded")
    phone.locator(f"#run-watch-{task.pk} li.tool").first.locator("summary").click()
    width = phone.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the page is {width} px wide on a 390 px screen"
    screenshot(phone, "run_watch_3_ended_phone")
    element_screenshot(phone.locator(f"#run-watch-{task.pk}"), "run_watch_3_ended_phone_watch")


def test_a_late_watch_answer_leaves_the_raw_log_on_the_page(new_page, product_owner):
    """The panel fetched again (its card moved, or an edit elsewhere) while the old panel's watch poll is
    still on its way: that answer has nowhere to go, and the open raw log, kept across redraws by
    hx-preserve, stays on the page (CI: htmx took it off the page along with such an answer, at a run's end)."""
    # Rows as the run's moves leave them (not through the services: their pushes need no browser here).
    runner, _, _ = runner_key_create(name="build-1", labels=["linux"], capacity=2)
    task = TaskFactory(title="Watch me")
    run = Run.objects.create(
        task=task,
        provider="demo",
        status=Run.Status.RUNNING,
        runner=runner,
        session=SessionFactory(),
        started_at=timezone.now(),
    )

    page = new_page(product_owner)
    page.locator(f"#task-{task.pk} .card-title").click()
    raw = page.locator(f"#task-panel #raw-log-{run.pk}")
    raw.locator("summary").click()
    expect(raw).to_contain_text("No log yet")

    # The next watch poll is held on its way back; meanwhile the panel is fetched again, as board.js does.
    held = []
    watch = re.compile(r"/tasks/\d+/watch/")

    def hold_the_first(route):  # later polls (the new panel's) go through
        if held:
            route.continue_()
        else:
            held.append(route)

    page.route(watch, hold_the_first)
    for _ in range(200):  # the watch polls every 2 s; the handler runs as Playwright's events are read
        if held:
            break
        page.wait_for_timeout(50)
    assert held, "no watch poll came in 10 s"
    link = page.locator(f"#task-{task.pk} .card-title").get_attribute("href")
    page.evaluate(f"() => htmx.ajax('GET', '{link}', {{target: '#task-panel-body', swap: 'innerHTML'}})")

    # The held answer arrives late; the new panel's own next poll is answered after it.
    with (
        page.expect_response(
            lambda r: watch.search(r.url) and r.status == 200 and r.request != held[0].request, timeout=15_000
        ),
        contextlib.suppress(PlaywrightError),  # the page called that request off: nothing to answer
    ):
        held[0].continue_()
    expect(raw).to_have_count(1)
    expect(raw).to_contain_text("No log yet")
