"""A product owner imports a priority file from the browser and its tasks are on the board."""

from playwright.sync_api import expect

from board.models import Task
from tests.browser.conftest import screenshot

PRIORITIES = """# Launch

## P0 Blockers
- [ ] Fix the checkout crash @claude-1 #payments
  Happens when the basket is empty.

## Low
- [ ] Polish the footer
"""


def test_preview_then_start_job_creates_the_tasks(new_page, product_owner, file_roots):
    (file_roots["REPORTS_DIR"] / "launch.md").write_text(PRIORITIES)
    page = new_page(product_owner)

    page.goto("/priorities/")
    page.get_by_label("Priority file").select_option("launch.md")
    page.get_by_role("button", name="Preview changes").click()
    preview = page.locator("#preview")
    expect(preview.get_by_role("heading", name="Preview of launch.md")).to_be_visible()
    expect(preview.get_by_role("cell", name="Fix the checkout crash")).to_be_visible()
    assert Task.objects.count() == 0  # a preview writes nothing
    screenshot(page, "priorities-preview")

    page.get_by_role("button", name="Start job").click()
    expect(page.get_by_role("heading", name="Imported launch.md")).to_be_visible()

    tasks = {t.title: t for t in Task.objects.all()}
    assert set(tasks) == {"Fix the checkout crash", "Polish the footer"}
    assert tasks["Fix the checkout crash"].priority == "P0"
    assert tasks["Fix the checkout crash"].suggested_agent == "claude-1"
    assert tasks["Polish the footer"].priority == "P3"

    page.get_by_role("link", name="Open the board").click()
    expect(page.get_by_text("Fix the checkout crash")).to_be_visible()
    expect(page.get_by_text("Polish the footer")).to_be_visible()
