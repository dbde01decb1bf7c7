"""On a phone (issue 25, part 5): a product owner's board shows "1 needs you" as soon as an agent's
permission request arrives (a real `switchyard hook` waiting on it), the count leads to the card
without crossing the board's columns, the command is read whole, and "Always allow ..." comes back to
the hook as Claude Code's updatedPermissions."""

import json
import time

from playwright.sync_api import expect

from board.models import Task
from sessions_app.keys import api_key_create
from sessions_app.models import AgentSession
from tests.browser.conftest import screenshot
from tests.browser.test_permission_browser import _hook
from tests.client.hook_events import FIXTURES, SID
from tests.factories import AgentFactory, SessionFactory, TaskFactory

PHONE = {"width": 390, "height": 844}


def test_the_count_appears_live_and_always_allow_reaches_the_hook(new_page, product_owner, live_app, tmp_path):
    # given a product owner's board on a phone, and an agent's session working on a card
    agent = AgentFactory(slug="claude-7")
    session = SessionFactory(id=SID, agent=agent, status=AgentSession.Status.RUNNING)
    task = TaskFactory(title="Fix the login tests", status=Task.Status.IN_PROGRESS, assignee=agent, session=session)
    for status in (Task.Status.BACKLOG, Task.Status.READY):
        TaskFactory(title=f"Another {status} card", status=status)
    page = new_page(product_owner, **PHONE)
    expect(page.locator("#board-live")).to_have_attribute("data-state", "live")
    expect(page.locator("#needs-you .needs-you-count")).to_have_attribute("data-count", "0")

    # when Claude Code asks permission through the hook
    proc = _hook(live_app, tmp_path, api_key_create(agent=agent).key)
    deadline = time.monotonic() + 20
    while AgentSession.objects.get(pk=SID).status != AgentSession.Status.WAITING_FOR_INPUT:
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() else "slow"
        time.sleep(0.05)

    # then the count appears without a reload, and leads to the card
    count = page.locator("#needs-you a.needs-you-count")
    expect(count).to_have_text("1 needs you")
    screenshot(page, "phone-board-needs-you")
    count.click()
    page.wait_for_url(f"**/tasks/{task.pk}/#task-run-{task.pk}")
    expect(page.locator(f"#task-run-{task.pk}")).to_be_in_viewport()  # no scrolling to find the question
    request = page.locator(".permission-request")
    expect(request.locator(".permission-subject")).to_have_text("pytest -q tests/auth")
    always = page.get_by_role("button", name="Always allow Bash(pytest:*) in this project (your local settings)")
    always.scroll_into_view_if_needed()
    screenshot(page, "phone-card-permission")
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]

    # when the product owner taps "Always allow ..."
    always.click()

    # then the hook allows with the suggestion applied, as Claude Code sent it
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert json.loads(out) == {
        "hookSpecificOutput": {
            "hookEventName": "PermissionRequest",
            "decision": {
                "behavior": "allow",
                "updatedPermissions": FIXTURES["PermissionRequest"]["permission_suggestions"],
            },
        }
    }
    assert AgentSession.objects.get(pk=SID).status == AgentSession.Status.RUNNING
    expect(page.locator("#needs-you .needs-you-count")).to_have_attribute("data-count", "0")  # nothing waits now
