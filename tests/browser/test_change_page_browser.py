"""The "Review the change" page in a real browser (issue 25 §3): a product owner opens the change
of a task's branch in a real git clone, switches side by side and back, comments on a line, and
requests changes; at 390 px the page is never wider than the screen."""

import datetime as dt

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from board.models import Task
from runners.models import ReviewComment, Run, TaskReview
from tests.browser.conftest import screenshot
from tests.factories import SessionFactory, TaskFactory
from tests.runners.test_task_review_api import APP, commit, git
from workspaces.worktrees.services import repository_register

LONG = "x = '" + "a very long line the agent wrote " * 12 + "'\n"


@pytest.fixture
def task_with_change(transactional_db, tmp_path):
    clone = tmp_path / "code" / "app"
    clone.mkdir(parents=True)
    git(clone, "init", "-q", "-b", "main")
    commit(clone, {"README.md": "# app\n", "src/app.py": APP}, "Initial commit")
    repository, _ = repository_register(path=str(clone))
    task = TaskFactory(title="Fix the app", repository=repository, status=Task.Status.REVIEW)
    git(clone, "checkout", "-q", "-b", f"task-{task.pk}")
    changed = APP.replace("line 5\n", "line five\n").replace("line 15\n", "line fifteen\n")
    commit(clone, {"src/app.py": changed, "src/long.py": LONG, "logo.png": b"\x89PNG\x00" * 30}, "Run 1")
    git(clone, "checkout", "-q", "main")
    Run.objects.create(
        task=task,
        provider="claude",
        status=Run.Status.SUCCEEDED,
        session=SessionFactory(task=task),
        started_at=timezone.now() - dt.timedelta(seconds=60),
        ended_at=timezone.now(),
    )
    return task


def _scroll_width(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth")


def test_a_product_owner_reads_the_change_comments_on_a_line_and_requests_changes(
    new_page, product_owner, task_with_change
):
    task = task_with_change
    page = new_page(product_owner)
    page.goto(f"/tasks/{task.pk}/")
    page.get_by_role("link", name="Review the change").click()
    expect(page.get_by_role("heading", name="Review the change")).to_be_visible()
    app_file = page.locator('section.file[data-path="src/app.py"]')
    expect(app_file.locator("table.diff.unified")).to_be_visible()
    expect(page.get_by_text("Binary file, not shown")).to_be_visible()

    # Side by side, remembered across a reload; then back.
    page.get_by_role("link", name="Side by side").click()
    expect(app_file.locator("table.diff.split")).to_be_visible()
    page.reload()
    expect(app_file.locator("table.diff.split")).to_be_visible()
    page.get_by_role("link", name="Unified").click()
    expect(app_file.locator("table.diff.unified")).to_be_visible()

    # "Show more" loads lines 9-11 between the hunks from the branch.
    app_file.get_by_role("button", name="Show 3 more lines: lines 9–11").click()
    expect(app_file.locator("tr.ctx td.code", has_text="line 10")).to_be_visible()

    # A line number opens the comment form; the comment lands under the line.
    app_file.locator("button.ln", has_text="5").first.click()
    form = app_file.locator("form.comment-form")
    form.get_by_role("textbox").fill("Use words for <every> number")
    form.get_by_role("button", name="Comment").click()
    comment = app_file.locator("article.comment", has_text="Use words for <every> number")
    expect(comment).to_be_visible()
    expect(comment.get_by_label("Send with the next request for changes")).to_be_checked()
    screenshot(page, "change-page-desktop")

    page.get_by_label("Message to the agent").fill("Numbers as words, please")
    page.get_by_role("button", name="Request changes").click()
    expect(page.locator("#decision").get_by_text("Changes requested")).to_be_visible()
    review = TaskReview.objects.get()
    assert review.run.prompt == (
        "Numbers as words, please\n\nReview comments:\n- src/app.py:5: Use words for <every> number"
    )
    assert ReviewComment.objects.get().review_id == review.pk


@pytest.mark.parametrize("view", ["unified", "split"])
def test_at_390_px_the_change_page_is_never_wider_than_the_screen(new_page, product_owner, task_with_change, view):
    task = task_with_change
    ReviewComment.objects.create(
        task=task, path="src/long.py", line=1, body="A comment " * 40, author="user:olivia", user=product_owner
    )
    page = new_page(product_owner, width=390, height=844)
    page.goto(f"/tasks/{task.pk}/change/?view={view}")
    expect(page.locator("table.diff").first).to_be_visible()

    assert _scroll_width(page) <= 390
    long_box = page.locator('section.file[data-path="src/long.py"] .diff-wrap')
    if view == "unified":
        # The long line scrolls inside its own box, not the page.
        assert long_box.evaluate("box => box.scrollWidth > box.clientWidth")
    screenshot(page, f"change-page-phone-{view}")


def test_a_file_past_the_first_screen_loads_its_rows_when_scrolled_to(
    new_page, product_owner, transactional_db, tmp_path
):
    clone = tmp_path / "code" / "big"
    clone.mkdir(parents=True)
    git(clone, "init", "-q", "-b", "main")
    commit(clone, {f"src/m{n:02d}.py": APP for n in range(12)}, "Initial commit")
    repository, _ = repository_register(path=str(clone))
    task = TaskFactory(title="Touch every module", repository=repository, status=Task.Status.REVIEW)
    git(clone, "checkout", "-q", "-b", f"task-{task.pk}")
    commit(clone, {f"src/m{n:02d}.py": APP.replace("line 5\n", f"line five in {n}\n") for n in range(12)}, "Run 1")
    git(clone, "checkout", "-q", "main")
    Run.objects.create(task=task, provider="demo", status=Run.Status.SUCCEEDED)
    page = new_page(product_owner)

    page.goto(f"/tasks/{task.pk}/change/")
    last = page.locator('section.file[data-path="src/m11.py"]')
    # The first ten files are in the page; the last ones wait for the reader.
    expect(page.locator('section.file[data-path="src/m00.py"] table.diff')).to_be_visible()
    expect(last.locator(".diff-wrap.deferred")).to_have_count(1)
    expect(last.locator("table.diff")).to_have_count(0)

    last.scroll_into_view_if_needed()

    expect(last.locator("td.code", has_text="line five in 11")).to_be_visible()
    expect(last.locator(".diff-wrap.deferred")).to_have_count(0)
    # Its rows work as the page's own: a line number opens the comment form.
    last.locator("button.ln", has_text="5").first.click()
    expect(last.locator("form.comment-form")).to_be_visible()
