"""Shipping from the card in a real browser: a product owner confirms and merges a task's change
(squash) on a desktop, and on a 390 px phone sees a conflict's files and asks the agent to resolve
it; the Ship box never makes the page wider than the screen."""

import pytest
from playwright.sync_api import expect

from board.models import Task
from runners.models import Run
from tests.browser.conftest import screenshot
from tests.factories import TaskFactory
from tests.runners.test_task_review_api import APP, commit, git
from workspaces.worktrees.services import repository_register


@pytest.fixture
def shipped_task(tmp_path, transactional_db):
    clone = tmp_path / "code" / "shop"
    clone.mkdir(parents=True)
    git(clone, "init", "-q", "-b", "main")
    commit(clone, {"src/app.py": APP}, "Initial commit")
    repository, _ = repository_register(path=str(clone))
    task = TaskFactory(title="Fix the checkout total", repository=repository, status=Task.Status.REVIEW)
    git(clone, "checkout", "-q", "-b", f"task-{task.pk}")
    commit(clone, {"src/app.py": APP.replace("line 5\n", "line five\n"), "docs/total.md": "# Totals\n"}, "Fix")
    git(clone, "checkout", "-q", "main")
    Run.objects.create(task=task, provider="demo", status=Run.Status.SUCCEEDED)
    return clone, task


def _fits(page) -> None:
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_a_product_owner_confirms_and_squashes_the_change_into_main(new_page, product_owner, shipped_task):
    clone, task = shipped_task
    page = new_page(product_owner)
    page.goto(f"/tasks/{task.pk}/")
    box = page.locator(f"#task-ship-{task.pk}")
    expect(box).to_contain_text("Not approved yet.")
    screenshot(page, "ship_card_desktop")

    box.locator("select[name=strategy]").select_option("squash")
    box.get_by_role("button", name="Merge into main").click()
    expect(box.get_by_label("Merge without an approval")).to_be_visible()  # required: nothing sent unticked
    assert git(clone, "log", "-1", "--format=%s", "main").strip() == "Initial commit"
    box.get_by_label("Merge without an approval").check()
    box.get_by_role("button", name="Merge into main").click()

    expect(page.locator(f"#task-ship-{task.pk}")).to_contain_text(f"Merged task-{task.pk} into main as")
    expect(page.locator(f"#task-ship-{task.pk}")).to_contain_text("Done: the change is shipped.")
    expect(page.locator(f"#task-column-{task.pk}")).to_have_text("Done")  # the panel's badge follows
    assert git(clone, "log", "-1", "--format=%s", "main").strip() == f"Fix the checkout total (task {task.pk})"
    assert Task.objects.get(pk=task.pk).status == Task.Status.DONE
    screenshot(page, "ship_card_merged_desktop")


def test_on_a_phone_a_conflict_lists_its_files_and_the_agent_is_asked_to_resolve_it(
    new_page, product_owner, shipped_task
):
    clone, task = shipped_task
    commit(clone, {"src/app.py": APP.replace("line 5\n", "line FIVE, from main\n")}, "Main changes line 5")
    page = new_page(product_owner, width=390, height=844)
    page.goto(f"/tasks/{task.pk}/")
    box = page.locator(f"#task-ship-{task.pk}")
    _fits(page)

    box.get_by_label("Merge without an approval").check()
    box.get_by_role("button", name="Merge into main").click()

    expect(page.locator(f"#task-ship-{task.pk} .ship-files")).to_have_text("src/app.py")
    _fits(page)
    screenshot(page, "ship_card_conflict_phone")
    page.locator(f"#task-ship-{task.pk}").get_by_role("button", name="Ask the agent to resolve it").click()
    expect(page.locator(f"#task-ship-{task.pk}")).to_contain_text("the agent is asked to resolve the conflict")
    assert "- src/app.py" in Run.objects.filter(task=task).latest("pk").prompt
