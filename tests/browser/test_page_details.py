"""What a new user sees at a glance: nothing covers a card's text, numbers line up, the tab has an icon."""

from playwright.sync_api import expect

from board.models import Task
from tests.admin.factories import WorktreeFactory
from tests.browser.conftest import screenshot
from tests.factories import AgentFactory, CampaignFactory, TaskFactory

MEASURE = """card => {
  const box = (el) => {
    const r = el.getBoundingClientRect();
    return {x: r.x, y: r.y, width: r.width, height: r.height, text: el.textContent.trim()};
  };
  const all = (selector) => Array.from(card.querySelectorAll(selector)).map(box);
  return {
    card: box(card),
    buttons: all(".card-moves button"),
    texts: all(".card-top > *, .card-title, .labels li, .card-meta > span"),
  };
}"""


def _inside(inner: dict, outer: dict) -> bool:
    return (
        outer["x"] <= inner["x"]
        and inner["x"] + inner["width"] <= outer["x"] + outer["width"]
        and outer["y"] <= inner["y"]
        and inner["y"] + inner["height"] <= outer["y"] + outer["height"]
    )


def _overlap(a: dict, b: dict) -> bool:
    return not (
        a["x"] + a["width"] <= b["x"]
        or b["x"] + b["width"] <= a["x"]
        or a["y"] + a["height"] <= b["y"]
        or b["y"] + b["height"] <= a["y"]
    )


def test_a_cards_move_buttons_cover_none_of_its_text(new_page, product_owner):
    # given cards with and without an agent and a long campaign name
    campaign = CampaignFactory(name="Spring developer webinar for platform engineers")
    agent = AgentFactory(slug="claude-1", display_name="Claude", emoji="🦊")
    cards = [
        TaskFactory(title="Landing page copy", status=Task.Status.READY, labels=["web"], campaign=campaign),
        TaskFactory(title="Email", status=Task.Status.READY, campaign=campaign, assignee=agent),
        TaskFactory(title="Plain", status=Task.Status.READY),
    ]
    page = new_page(product_owner)
    expect(page.locator("#board-live")).to_have_attribute("data-state", "live")

    for task in cards:
        # when the pointer is over the card, its move buttons show
        card = page.locator(f"#task-{task.pk}")
        card.hover()
        expect(card.locator(".card-moves")).to_have_css("opacity", "1")

        # then they sit inside the card, clear of every piece of its text (measured in one go in the page)
        boxes = card.evaluate(MEASURE)
        for button in boxes["buttons"]:
            assert _inside(button, boxes["card"]), f"{task.title}: a move button sticks out of the card"
            for text in boxes["texts"]:
                assert not _overlap(button, text), f"{task.title}: a move button covers {text['text']!r}"
    screenshot(page, "board_card_hover")


def test_the_worktrees_numbers_are_right_aligned_under_their_headers(new_page, engineer):
    # given a worktree on the monitor page
    WorktreeFactory()
    page = new_page(engineer)

    # when the page shows
    page.goto("/worktrees/")

    # then the numeric headers and cells align alike, to the right
    numeric = page.locator("table.worktrees th.num, table.worktrees td.num")
    expect(numeric).to_have_count(4)
    for cell in numeric.all():
        expect(cell).to_have_css("text-align", "right")
    screenshot(page, "worktrees")


def test_the_tab_gets_an_icon(new_page, product_owner):
    page = new_page(product_owner)

    icon = page.locator('link[rel="icon"]')
    href = icon.get_attribute("href")
    response = page.request.get(href)
    fallback = page.request.get("/favicon.ico")

    assert icon.get_attribute("type") == "image/svg+xml"
    assert response.status == 200
    assert response.headers["content-type"] == "image/svg+xml"
    assert fallback.status == 200  # after the permanent redirect
    assert fallback.url.endswith(href)
