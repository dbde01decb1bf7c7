"""The session page shows an agent's diff event as a diff and its plan as a checklist, pushed live,
readable at 390 px (issue 25, "Watch a run")."""

from playwright.sync_api import expect

from tests.browser.conftest import screenshot
from tests.browser.test_session_page import _agent_api

DIFF = "".join(
    [
        "diff --git a/shop/checkout.py b/shop/checkout.py\n--- a/shop/checkout.py\n+++ b/shop/checkout.py\n",
        "@@ -10,3 +10,3 @@ def total(cart):\n",
        "-    return sum(item.price for item in cart)\n",
        "+    return sum(item.price * item.quantity for item in cart)  # a long line that must wrap on a phone\n",
        "     # unchanged\n",
    ]
)


def test_a_diff_and_a_plan_arrive_live_as_a_diff_and_a_checklist(new_page, engineer, live_app):
    api = _agent_api(live_app)
    sid = api.post("sessions/", json={"intent": "Fix the checkout total"}).json()["id"]
    api.post(f"sessions/{sid}/transition/", json={"status": "running"})

    page = new_page(engineer)
    page.goto(f"/sessions/{sid}/")
    page.wait_for_function("() => document.querySelector('[ws-connect]') && window.htmx !== undefined")
    page.wait_for_timeout(500)  # the page's websocket open before the agent writes
    todos = [
        {"content": "Read checkout.py", "status": "completed"},
        {"content": "Fix the total", "status": "in_progress"},
    ]
    api.post(f"sessions/{sid}/events/", json={"type": "plan_update", "payload": {"todos": todos}})
    api.post(f"sessions/{sid}/events/", json={"type": "diff", "payload": {"diff": DIFF, "path": "shop/checkout.py"}})

    events = page.locator("#event-list")
    expect(events.locator(".checklist .step-completed")).to_have_text("☑ completed:Read checkout.py")
    expect(events.locator(".diff-view .hl-gi").last).to_contain_text("+    return sum(item.price * item.quantity")
    expect(events.locator(".diff-view .hl-gd").last).to_contain_text("-    return sum(item.price for item in cart)")
    screenshot(page, "session_event_bodies_desktop")

    phone = new_page(engineer, width=390, height=844)
    phone.goto(f"/sessions/{sid}/")
    expect(phone.locator("#event-list .diff-view")).to_be_visible()
    width = phone.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the session page is {width} px wide on a 390 px screen"
    phone.locator("#event-list .diff-view").screenshot(
        path=str(screenshot(phone, "session_event_bodies_phone").with_name("session_event_bodies_phone_diff.png"))
    )
