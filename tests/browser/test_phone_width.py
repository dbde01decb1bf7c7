"""No page wider than a phone (issue 25, part 5): every page a person can reach, at 390 x 844 in
Chromium, scrolls only down. The pages are the list in tests/browser/phone_pages.py."""

import pytest
from playwright.sync_api import expect

from config.pages import ENGINEERS
from tests.browser.conftest import person, screenshot
from tests.browser.phone_pages import PHONE_PAGES, PhonePage, phone_world

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
def phone_pages(new_page, browser_type, live_app, engineer):
    """One browser page per kind of person, at 390 x 844, reused from page to page."""
    opened: dict = {}

    def page_for(who: str):
        if who in opened:
            return opened[who]
        if who == "anonymous":
            opened[who] = browser_type.new_context(viewport=PHONE, base_url=live_app.url).new_page()
            opened[who].set_default_timeout(20_000)
        elif who == "superuser":
            root = person(ENGINEERS, username="root")
            root.is_superuser = True
            root.save(update_fields=["is_superuser"])
            opened[who] = new_page(root, **PHONE)
        else:
            opened[who] = new_page(engineer, **PHONE)
        return opened[who]

    yield page_for
    if "anonymous" in opened:
        opened["anonymous"].context.close()


def _width(page, spec: PhonePage, ids: dict) -> str:
    """Open the page as a person would at 390 x 844 (and the card's panel, where asked); what is wider
    than the screen, or ""."""
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
        if panel["scroll"] > panel["client"] or panel["right"] > PHONE["width"]:
            return f"{spec.name}: the card's panel is {panel['scroll']}px wide in {panel['client']}px"
    width = page.evaluate("document.documentElement.scrollWidth")
    screenshot(page, f"phone-{spec.name}")
    if width <= PHONE["width"]:
        return ""
    return f"{spec.name}: {url} is {width}px wide: {page.evaluate(WIDEST, PHONE['width'])}"


def test_every_page_is_no_wider_than_a_phone(phone_pages):
    # given the pages' rows (a waiting permission request with a long command among them)
    ids = phone_world()

    # when a person opens each page of the list at 390 x 844
    too_wide = [_width(phone_pages(spec.who), spec, ids) for spec in PHONE_PAGES]

    # then none is wider than the screen
    assert [problem for problem in too_wide if problem] == []
