"""A real Claude Code run, watched from its card: a real runner runs the pinned CLI against the
scripted Messages API (as tests/runners/test_runner_claude_e2e.py), ships its stream-json log, and a
product owner's panel shows it as a conversation while the model still holds its next answer, then
with the result line's tokens and cost."""

import pytest
from django.test import Client as PageClient

from config.pages import PRODUCT_OWNERS
from tests.page_users import user_in
from tests.runners.fake_anthropic import FakeAnthropic, text, tool_use
from tests.runners.live_runner import run_in, wait_for
from tests.runners.test_runner_claude_e2e import queue_claude

pytestmark = pytest.mark.usefixtures("transactional_db")


def test_an_owner_watches_a_real_claude_run_as_a_conversation(
    person, machine, repository, sy_server, server_roots, settings
):
    settings.LOGS_ROOT = server_roots["LOGS_ROOT"]  # the pages here read the logs the live server writes
    run = queue_claude(person, repository, "Write the notes")
    owner = PageClient()
    owner.force_login(user_in(PRODUCT_OWNERS, username="olivia"))
    watch_url = f"/tasks/{run.task_id}/watch/"
    script = [
        tool_use(
            "Bash",
            {"command": "echo 'made by claude' > notes.txt", "description": "write the notes"},
            text="I'll write <b>the notes</b> first.",
        ),
        text("Done: **notes.txt** is written."),
    ]
    with FakeAnthropic(script, hold_at=1) as fake:  # the answer after the tool's result waits for the test
        machine.point_at(fake)
        machine.start()
        assert fake.held.wait(180), machine.output()

        def tool_shown() -> str:
            html = owner.get(watch_url).content.decode()
            return html if "tool-done" in html else ""

        html = wait_for(tool_shown, timeout=60, what="the tool call on the card", machines=[machine], interval=0.3)
        # Its words as sanitised markdown (<b> is harmless and kept, as in task descriptions).
        assert "<p>I'll write <b>the notes</b> first.</p>" in html
        assert "<pre>(Bash completed with no output)</pre>" in html  # its tool_result, from the log
        assert (
            '<span class="tool-name">Bash</span> <code class="tool-head">echo &#x27;made by claude&#x27; &gt; notes.txt</code>'
            in html
        )
        assert "notes.txt is written" not in html  # not said yet: the model holds it
        assert 'class="badge status-running"' in html
        fake.go.set()
        wait_for(lambda: run_in(run, "succeeded", "failed"), timeout=180, what="the run to end", machines=[machine])

    assert run.status == "succeeded", machine.output()
    html = owner.get(watch_url).content.decode()
    assert "Done: <strong>notes.txt</strong> is written." in html
    assert " tokens</span>" in html and 'title="Cost so far">$' in html  # the result line's totals
    assert '"type":"assistant"' not in html
