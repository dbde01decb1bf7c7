"""An engineer watches a session live while its agent works through the real API."""

import httpx
from playwright.sync_api import expect

from sessions_app.keys import api_key_create
from sessions_app.models import AgentSession
from tests.browser.conftest import screenshot
from tests.factories import AgentFactory


def _agent_api(live_app):
    agent = AgentFactory(slug="claude-7", display_name="Claude seven", emoji="🤖")
    key = api_key_create(agent=agent).key
    return httpx.Client(base_url=f"{live_app.url}/api/v1/", headers={"Authorization": f"Bearer {key}"}, timeout=10)


def test_events_tool_calls_log_and_an_answered_question_arrive_live(new_page, engineer, live_app, file_roots):
    api = _agent_api(live_app)
    session = api.post("sessions/", json={"intent": "Migrate the billing tables"}).json()
    sid = session["id"]
    assert api.post(f"sessions/{sid}/transition/", json={"status": "running"}).status_code == 200

    page = new_page(engineer)
    page.goto(f"/sessions/{sid}/")
    expect(page.get_by_role("heading", name="Migrate the billing tables")).to_be_visible()
    # The page's websocket is open before the agent writes.
    page.wait_for_function("() => document.querySelector('[ws-connect]') && window.htmx !== undefined")
    page.wait_for_timeout(500)

    api.post(f"sessions/{sid}/events/", json={"type": "log", "payload": {"message": "Copying 3 tables"}})
    expect(page.locator("#event-list")).to_contain_text("Copying 3 tables")

    call = api.post(f"sessions/{sid}/tool-calls/", json={"tool_name": "Bash", "input": {"command": "pg_dump"}}).json()
    expect(page.locator("#toolcall-rows")).to_contain_text("Bash")
    expect(page.locator("#toolcall-count")).to_have_text("1 in all")
    api.patch(f"tool-calls/{call['id']}/", json={"status": "failure", "error": "permission denied"})
    expect(page.locator("#toolcall-rows")).to_contain_text("permission denied")
    expect(page.locator("#toolcall-count")).to_have_text("1 in all · 1 failed")

    log = file_roots["LOGS_ROOT"] / "orchestrator-sessions" / f"session-{sid}" / "claude-7.log"
    log.parent.mkdir(parents=True)
    log.write_text("step 1: dump\n")
    expect(page.locator("#log-output")).to_contain_text("step 1: dump")
    with log.open("a") as out:
        out.write("step 2: restore\n")
    expect(page.locator("#log-output")).to_contain_text("step 2: restore")

    question = api.post(
        f"sessions/{sid}/events/", json={"type": "input_request", "payload": {"question": "Drop the old table?"}}
    ).json()
    api.post(f"sessions/{sid}/transition/", json={"status": "waiting_for_input"})
    reply = page.get_by_label("Your answer")
    expect(reply).to_be_visible()
    expect(page.locator("#session-input")).to_contain_text("Drop the old table?")
    screenshot(page, "session-waiting-for-input")

    reply.fill("Keep it for a week, then drop it.")
    page.get_by_role("button", name="Send answer").click()
    # The form's own answer ("Answer sent") and the live status push race to redraw the box: either
    # way the form is gone and the header says the session runs again.
    expect(page.get_by_label("Your answer")).to_have_count(0)
    expect(page.locator(".badge.big")).to_have_text("Running")

    answers = api.get(f"sessions/{sid}/events/", params={"after_seq": question["seq"]}).json()["results"]
    answer = [e for e in answers if e["type"] == "input_request"]
    assert [a["payload"]["answer"] for a in answer] == ["Keep it for a week, then drop it."]
    assert answer[0]["payload"]["in_reply_to"] == question["seq"]
    assert answer[0]["payload"]["answered_by"] == engineer.username
    assert AgentSession.objects.get(pk=sid).status == AgentSession.Status.RUNNING
    screenshot(page, "session-page")
