""" "Always allow ..." with the real Claude Code CLI (claude_cli.py's pinned 2.1.332) against a scripted
Messages API (issue 25, part 5): Claude Code asks permission for a command, `switchyard hook` records
the request with Claude Code's own ``permission_suggestions`` and waits; a person answers on the
session page with one of them (for ``touch`` Claude Code offers the folder, and "accept edits" mode
for the session); Claude Code takes the hook's ``updatedPermissions``, runs the command, and does not
ask again for the same command."""

import subprocess
import threading
import time
import uuid

import pytest

from ledger.models import ToolInvocation
from sessions_app.models import AgentSession, StreamEvent
from tests.client.hook_person import person_answers, signed_in_engineer
from tests.client.live import agent_key, server_roots, sy_server  # noqa: F401
from tests.runners.claude_cli import claude_env, hook_settings, require_claude
from tests.runners.fake_anthropic import FakeAnthropic, text, tool_use

pytestmark = pytest.mark.django_db(transaction=True)

COMMAND = "touch always-allowed.txt"


def _waiting(session_id: str, proc: subprocess.Popen, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while not AgentSession.objects.filter(pk=session_id, status=AgentSession.Status.WAITING_FOR_INPUT).exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "Claude Code never asked"
        time.sleep(0.1)


def test_claude_code_applies_the_suggestion_a_person_chose(sy_server, agent_key, tmp_path):  # noqa: F811
    claude = require_claude()
    workdir = tmp_path / "work"
    workdir.mkdir()
    session = str(uuid.uuid4())
    env = claude_env(
        home=tmp_path / "home",
        api_url="",
        SWITCHYARD_URL=sy_server.url,
        SWITCHYARD_KEY=agent_key,
        SWITCHYARD_STATE_DIR=str(tmp_path / "switchyard-state"),
        SWITCHYARD_HOOK_BUDGET="5",
        SWITCHYARD_PERMISSION_TIMEOUT="50",
    )
    script = [
        tool_use("Bash", {"command": COMMAND, "description": "make the file"}),
        tool_use("Bash", {"command": COMMAND, "description": "make it again"}),
        text("Done."),
    ]
    events = ("SessionStart", "PreToolUse", "PostToolUse", "PermissionRequest", "Stop")
    cookies = signed_in_engineer()
    with FakeAnthropic(script) as fake:
        env["ANTHROPIC_BASE_URL"] = fake.url
        argv = [str(claude), "-p", "Make the file twice", "--output-format", "stream-json", "--verbose"]
        argv += ["--session-id", session, "--settings", hook_settings(events=events)]
        proc = subprocess.Popen(argv, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            # given Claude Code waiting on the hook for a person's answer
            _waiting(session, proc)
            question = StreamEvent.objects.get(session_id=session, payload__hook="PermissionRequest").payload
            offered = question["permission_suggestions"]
            index = next(i for i, s in enumerate(offered) if s["type"] == "setMode" and s["mode"] == "acceptEdits")

            # when a person answers "Allow, and switch to accept edits mode for this session"
            answered: dict = {}
            person = threading.Thread(
                target=lambda: answered.update(
                    r=person_answers(sy_server.url, session, cookies, suggestion=str(index))
                ),
                daemon=True,
            )
            person.start()
            out, err = proc.communicate(timeout=180)
            person.join(10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert proc.returncode == 0, f"{err}\n{fake.describe()}"

    # then the command ran twice and Claude Code asked once: the mode it switched to lets the second run
    assert answered["r"].status_code == 302
    assert (workdir / "always-allowed.txt").exists()
    calls = ToolInvocation.objects.filter(session_id=session).order_by("client_id").values_list("client_id", "status")
    assert list(calls) == [("toolu_fake_00", "success"), ("toolu_fake_01", "success")], out[-3000:]
    assert StreamEvent.objects.filter(session_id=session, payload__hook="PermissionRequest").count() == 1
