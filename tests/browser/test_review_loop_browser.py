"""The whole loop in a real browser, as a product owner (issue 25, "Done when"): a task typed on the
board with "Run with demo", its conversation watched on the card while a real runner runs it, its change
read on the review page, a line comment and a request for changes, the same task's branch moving on in
the continuing run and the diff updating, an approval, a squash merge from the card; the change is on
the repository's default branch and the card is in Done. Then the same pages at 390 px."""

from pathlib import Path

from playwright.sync_api import expect

from board.models import Task
from runners.models import Run
from tests.browser.conftest import screenshot
from tests.browser.test_run_flow_browser import repository, start_runner, wait_for  # noqa: F401
from tests.runners.live_runner import git


def _ended(task: Task, count: int, runner) -> list[Run]:
    def done():
        runs = list(Run.objects.filter(task=task).order_by("id"))
        return runs if len(runs) == count and all(r.status in Run.TERMINAL for r in runs) else None

    return wait_for(done, timeout=90, what=f"{count} run(s) of task {task.pk} to end", runner=runner)


def test_a_product_owner_takes_a_typed_task_to_merged_code(new_page, product_owner, start_runner, repository):  # noqa: F811
    runner = start_runner(speed=20)
    board = new_page(product_owner)
    expect(board.locator("#board-live")).to_have_attribute("data-state", "live")

    # A task typed on the board, run at once with the demo agent
    board.locator("body").press("n")
    form = board.locator("#new-task")
    form.get_by_label("Title").fill("Write the onboarding notes")
    form.get_by_label("Description").fill("Notes for **new** people.")
    form.get_by_label("Repository").select_option(label=repository.name)
    form.get_by_label("Run with").select_option("demo")
    form.get_by_role("button", name="Create task").click()
    expect(form).to_be_hidden()
    task = Task.objects.get(title="Write the onboarding notes")

    # Watched on its card while it runs, then the attempt listed
    board.locator(f"#task-{task.pk} .card-title").click()
    panel = board.locator("#task-panel")
    watch = panel.locator(f"#run-watch-{task.pk}")
    expect(watch.locator("ol.conversation")).to_contain_text("Demo agent started on task", timeout=30_000)
    [first] = _ended(task, 1, runner)
    assert first.status == "succeeded", (first.error, runner.output())
    expect(watch.locator("ol.attempts")).to_contain_text("Succeeded", timeout=15_000)

    # The change, read and commented on a line; changes requested from the same agent
    board.goto(f"/tasks/{task.pk}/change/")
    notes = f"NOTES-task-{task.pk}.md"
    section = board.locator(f'section.file[data-path="{notes}"]')
    expect(section.locator("table.diff")).to_be_visible()
    section.locator("button.ln", has_text="1").first.click()
    comment_form = section.locator("form.comment-form")
    comment_form.get_by_role("textbox").fill("Say who it is for.")
    comment_form.get_by_role("button", name="Comment").click()
    expect(section.locator("article.comment", has_text="Say who it is for.")).to_be_visible()
    board.get_by_label("Message to the agent").fill("Add a summary.")
    board.get_by_role("button", name="Request changes").click()
    expect(board.locator("#decision")).to_contain_text("Changes requested")
    screenshot(board, "review_loop_1_changes_requested")

    second = _ended(task, 2, runner)[1]
    assert (second.status, second.kind, second.resumes_id) == ("succeeded", "continue", first.pk), second.error

    # The diff has moved on; approve it
    board.reload()
    expect(board.locator(f'section.file[data-path="{notes}"]')).to_contain_text("Add a summary.")
    expect(board.locator(f'section.file[data-path="{notes}"]')).to_contain_text("Say who it is for.")
    board.get_by_role("button", name="Approve").click()
    expect(board.locator("#decision")).to_contain_text("Approved")

    # Shipped from the card: squash-merged into main, the card in Done
    board.goto("/")
    board.locator(f"#task-{task.pk} .card-title").click()
    box = board.locator(f"#task-ship-{task.pk}")
    box.locator("select[name=strategy]").select_option("squash")
    box.get_by_role("button", name="Merge into main").click()
    expect(box).to_contain_text("Done: the change is shipped.", timeout=15_000)
    expect(board.locator(f"#cards-done #task-{task.pk}")).to_be_visible()
    screenshot(board, "review_loop_2_merged")
    task.refresh_from_db()
    assert task.status == "done"
    assert "Add a summary." in git(Path(repository.path), "show", f"main:{notes}")

    # On a phone: the change page and the task, never wider than the screen
    phone = new_page(product_owner, width=390, height=844)
    for url in (f"/tasks/{task.pk}/change/", f"/tasks/{task.pk}/"):
        phone.goto(url)
        width = phone.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"{url} is {width} px wide on a 390 px screen"
    screenshot(phone, "review_loop_3_phone")
