"""'+ New task' and the card panel's edit part in a real browser: the shortcut, the live preview, a
field error fixed, the card on a second open board without a reload, and an edit seen there too."""

import json

from playwright.sync_api import expect

from board.models import Campaign, Task
from config.pages import PRODUCT_OWNERS
from runners.models import Run
from tests.browser.conftest import person, screenshot
from tests.factories import CampaignFactory, TaskFactory


def _live(*pages):
    for page in pages:
        expect(page.locator("#board-live")).to_have_attribute("data-state", "live")


def test_a_product_owner_creates_a_task_with_the_shortcut_and_a_second_board_sees_it(new_page, transactional_db):
    campaign = CampaignFactory(name="Spring launch")
    TaskFactory(title="Already here", status="ready")
    owner, watcher = (
        new_page(person(PRODUCT_OWNERS, username="olivia")),
        new_page(person(PRODUCT_OWNERS, username="pat")),
    )
    _live(owner, watcher)

    owner.locator("body").press("n")

    form = owner.locator("#new-task")
    expect(form).to_be_visible()
    title = form.get_by_label("Title")
    expect(title).to_be_focused()
    form.get_by_label("Description").fill("Say **why** it matters.\n\n- one\n- two")
    expect(form.locator("#new-preview strong")).to_have_text("why")
    expect(form.locator("#new-preview li")).to_have_count(2)
    form.get_by_label("Priority").select_option("P1")
    form.get_by_label("Labels").fill("web, marketing")
    form.get_by_label("Campaign").select_option(label="Spring launch")
    form.get_by_label("Run with").select_option("demo")
    screenshot(owner, "new_task_form_desktop")

    form.get_by_role("button", name="Create task").click()  # no title yet

    error = form.locator("#new-title-error")
    expect(error).to_have_text("Give the task a title.")
    expect(form.get_by_label("Title")).to_be_focused()
    expect(form.get_by_label("Run with")).to_have_value("demo")  # what was chosen stays
    expect(form.get_by_label("Labels")).to_have_value("web, marketing")
    assert Task.objects.count() == 1 and Run.objects.count() == 0
    screenshot(owner, "new_task_form_error_desktop")

    form.get_by_label("Title").fill("Landing page copy")
    form.get_by_role("button", name="Create task").click()

    expect(form).to_be_hidden()
    task = Task.objects.get(title="Landing page copy")
    card = watcher.locator(f"#cards-ready #task-{task.pk}")
    expect(card).to_be_visible()  # pushed: the watcher never reloads
    expect(card.locator(".campaign")).to_have_text("Spring launch")
    expect(card.locator(".labels li")).to_have_text(["web", "marketing"])
    expect(owner.locator(f"#task-{task.pk}")).to_be_focused()
    assert (task.priority, task.labels, task.campaign_id) == ("P1", ["web", "marketing"], campaign.pk)
    assert Run.objects.get().task_id == task.pk

    # The key does nothing while typing in a field.
    owner.locator("#f-q").press("n")
    expect(form).to_be_hidden()


def test_an_edit_in_the_panel_shows_on_another_board_and_its_open_panel(new_page, transactional_db):
    task = TaskFactory(title="Fix the login bug", status="ready", priority="P2", labels=["auth"])
    editor, watcher = (
        new_page(person(PRODUCT_OWNERS, username="olivia")),
        new_page(person(PRODUCT_OWNERS, username="pat")),
    )
    _live(editor, watcher)
    watcher.locator(f"#task-{task.pk}").click()
    expect(watcher.locator("#task-panel-title")).to_have_text("Fix the login bug")

    editor.locator(f"#task-{task.pk}").click()
    panel = editor.locator("#task-panel")
    panel.get_by_text("Edit title, description, priority, labels or campaign").click()
    panel.get_by_label("Title").fill("")
    panel.get_by_role("button", name="Save changes").click()
    expect(panel.locator(f"#edit-{task.pk}-title-error")).to_have_text("Give the task a title.")

    panel.get_by_label("Title").fill("Fix the login bug on Safari")
    panel.get_by_label("Priority").select_option("P0")
    panel.get_by_role("button", name="Save changes").click()

    expect(panel.get_by_text("Saved: title, priority.")).to_be_visible()
    expect(panel.locator("#task-panel-title")).to_have_text("Fix the login bug on Safari")
    card = watcher.locator(f"#task-{task.pk}")
    expect(card.locator(".card-title")).to_have_text("Fix the login bug on Safari")
    expect(card.locator(".badge.P0")).to_be_visible()
    expect(watcher.locator("#task-panel-title")).to_have_text("Fix the login bug on Safari")  # its open panel follows
    screenshot(editor, "task_edit_panel_desktop")


def test_the_form_fits_a_phone(new_page, transactional_db):
    CampaignFactory(name="Spring launch")
    page = new_page(person(PRODUCT_OWNERS, username="olivia"), width=390, height=844)
    _live(page)

    page.get_by_role("link", name="+ New task").click()

    form = page.locator("#new-task")
    expect(form.get_by_label("Title")).to_be_focused()
    form.get_by_label("Description").fill("# Plan\n\nA **long** line " + "word " * 40)
    expect(form.locator("#new-preview h1")).to_have_text("Plan")
    form.get_by_role("button", name="Create task").click()
    expect(form.locator("#new-title-error")).to_be_visible()
    widths = page.evaluate(
        "() => [document.documentElement.scrollWidth, document.querySelector('#new-task').scrollWidth,"
        " document.querySelector('#new-task').clientWidth]"
    )
    assert widths[0] <= 390 and widths[1] <= widths[2], widths
    form.screenshot(path=str(screenshot(page, "new_task_form_phone_page").with_name("new_task_form_phone.png")))


def test_a_campaign_preview_then_its_name_opens_the_filtered_board(new_page, product_owner, file_roots):
    definition = {"type": "marketing-campaign", "name": "Spring launch", "deliverables": ["blog-post", "email"]}
    (file_roots["TASK_DEFS_DIR"] / "spring.json").write_text(json.dumps(definition))
    TaskFactory(title="Not in the campaign", status="ready")
    for width, height, name in ((1280, 900, "desktop"), (390, 844, "phone")):
        page = new_page(product_owner, width=width, height=height)
        page.goto("/campaigns/")
        page.get_by_role("link", name="Preview spring.json").click()
        preview = page.locator("#campaign-preview")
        expect(preview.get_by_role("heading", name="Preview of spring.json")).to_be_visible()
        expect(preview.get_by_role("cell", name="Spring launch: blog-post")).to_be_visible()
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        screenshot(page, f"campaign_preview_{name}")
    assert Task.objects.count() == 1  # a preview writes nothing

    preview.get_by_role("button", name="Start campaign").click()
    page.locator(".campaign h3").get_by_role("link", name="Spring launch").click()

    expect(page.locator("#board-columns .task-card")).to_have_count(2)
    expect(page.get_by_label("Campaign")).to_have_value(str(Campaign.objects.get().pk))
