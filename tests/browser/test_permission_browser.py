"""A person answers a permission request in the browser while a real `switchyard hook` process waits
for it (issue 15, part 2): the session page shows the tool, its input and Allow / Deny; the click
comes back as the hook's decision JSON on stdout."""

import json
import os
import subprocess
import sys
import time

from playwright.sync_api import expect

from sessions_app.keys import api_key_create
from sessions_app.models import AgentSession
from tests.browser.conftest import screenshot
from tests.client.hook_events import FIXTURES, SID
from tests.factories import AgentFactory


def _hook(live_app, tmp_path, key: str) -> subprocess.Popen:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "SWITCHYARD_URL": live_app.url,
        "SWITCHYARD_KEY": key,
        "SWITCHYARD_STATE_DIR": str(tmp_path / "hook-state"),
        "SWITCHYARD_HOOK_BUDGET": "5",
        "SWITCHYARD_PERMISSION_TIMEOUT": "50",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "switchyard_client.cli", "hook"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    proc.stdin.write(json.dumps(FIXTURES["PermissionRequest"]))
    proc.stdin.close()
    proc.stdin = None
    return proc


def test_a_person_denies_in_the_browser_while_the_hook_waits(new_page, engineer, live_app, tmp_path):
    # given a hook process waiting on Claude Code's permission request
    key = api_key_create(agent=AgentFactory(slug="claude-7")).key
    proc = _hook(live_app, tmp_path, key)
    deadline = time.monotonic() + 20
    while not AgentSession.objects.filter(pk=SID, status=AgentSession.Status.WAITING_FOR_INPUT).exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() else "slow"
        time.sleep(0.05)

    # when an engineer opens the session and denies it with a message
    page = new_page(engineer)
    page.goto(f"/sessions/{SID}/")
    box = page.locator("#session-input")
    expect(box.locator(".permission-tool")).to_have_text("Bash")
    expect(box.locator(".permission-input")).to_contain_text("pytest -q tests/auth")
    screenshot(page, "session-permission-request")
    assert proc.poll() is None  # still waiting
    box.get_by_label("Message").fill("Run it in the container instead.")
    box.get_by_role("button", name="Deny").click()

    # then the hook prints the decision for Claude Code, and the session runs again
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert json.loads(out) == {
        "hookSpecificOutput": {
            "hookEventName": "PermissionRequest",
            "decision": {
                "behavior": "deny",
                "message": "Denied by erin in Switchyard: Run it in the container instead.",
            },
        }
    }
    expect(page.get_by_text("running").first).to_be_visible()
    assert AgentSession.objects.get(pk=SID).status == AgentSession.Status.RUNNING
