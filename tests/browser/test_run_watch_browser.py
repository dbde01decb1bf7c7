"""Watching a run from its card, in a real browser, as a product owner (issue 25, "Watch a run"): a
real runner runs the demo agent; while it runs, the card panel shows its conversation (its words,
its plan, its tool calls with their input folded), the raw log one click away and following, and
the elapsed time; an unfolded tool call stays unfolded as the panel redraws; when it ends, the
attempts list. Desktop and 390 x 844, never wider than the screen."""

from playwright.sync_api import expect

from tests.browser.conftest import SCREENSHOTS, screenshot
from tests.browser.test_run_flow_browser import RUNNER, press_run, repository, start_runner, the_run, wait_for  # noqa: F401
from tests.factories import TaskFactory


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
    watch.screenshot(path=str(SCREENSHOTS / "run_watch_1_running_desktop_watch.png"))
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
    phone.locator(f"#run-watch-{task.pk}").screenshot(path=str(SCREENSHOTS / "run_watch_3_ended_phone_watch.png"))
