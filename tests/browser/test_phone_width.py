"""No page wider than a phone (issue 25, part 5): every page a person can reach, at 390 x 844 in
Chromium, scrolls only down. The pages are the list in tests/browser/phone_pages.py."""

import pytest
from playwright.sync_api import expect

from config.pages import ENGINEERS
from tests.browser.conftest import person, screenshot
from tests.browser.phone_pages import PHONE_PAGES, phone_world

PHONE = {"width": 390, "height": 844}

# What sticks out, for the failure message: the widest elements that end past the screen's edge.
WIDEST = """limit => Array.from(document.querySelectorAll("body *"))
  .map((el) => ({el, right: el.getBoundingClientRect().right}))
  .filter(({el, right}) => right > limit + 0.5 && el.getClientRects().length)
  .sort((a, b) => b.right - a.right).slice(0, 5)
  .map(({el, right}) => `${el.tagName.toLowerCase()}${el.id ? "#" + el.id : ""}.${[...el.classList].join(".")} ends at ${Math.round(right)}`)"""

PANEL = """() => {
  const panel = document.getElementById("task-panel");
  return {scroll: panel.scrollWidth, client: panel.clientWidth, right: panel.getBoundingClientRect().right};
}"""


@pytest.fixture
def phone_page(new_page, browser_type, live_app, engineer):
    contexts = []

    def open_page(who: str):
        if who == "anonymous":
            contexts.append(browser_type.new_context(viewport=PHONE, base_url=live_app.url))
            page = contexts[-1].new_page()
            page.set_default_timeout(10_000)
            return page
        if who == "superuser":
            root = person(ENGINEERS, username="root")
            root.is_superuser = True
            root.save(update_fields=["is_superuser"])
            return new_page(root, **PHONE)
        return new_page(engineer, **PHONE)

    yield open_page
    for context in contexts:
        context.close()


@pytest.mark.parametrize("spec", PHONE_PAGES, ids=lambda spec: spec.name)
def test_the_page_is_no_wider_than_a_phone(phone_page, spec):
    # given the pages' rows (a waiting permission request with a long command among them)
    ids = phone_world()
    page = phone_page(spec.who)

    # when a person opens the page at 390 x 844 (and the card's panel, where asked)
    url = spec.url.format(**ids)
    page.goto(url)
    page.wait_for_load_state("load")
    if spec.top_bar:
        expect(page.locator("#needs-you .needs-you-count")).to_be_attached()  # the top bar's count, fetched
    if spec.open_card:
        page.locator(f"#task-{ids['task']} .card-title").click()
        expect(page.locator("#task-panel .task-detail")).to_be_visible()
        # The panel is a modal dialog in the top layer: the document does not grow with it.
        panel = page.evaluate(PANEL)
        assert panel["scroll"] <= panel["client"] and panel["right"] <= PHONE["width"], panel

    # then nothing is wider than the screen
    width = page.evaluate("document.documentElement.scrollWidth")
    screenshot(page, f"phone-{spec.name}")
    assert width <= PHONE["width"], f"{url} is {width}px wide: {page.evaluate(WIDEST, PHONE['width'])}"
