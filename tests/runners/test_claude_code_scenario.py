"""The real Claude Code CLI (claude_cli.py's pinned 2.1.332) in a run a person takes part in: its hooks
wired to `switchyard hook` against the live app, a scripted Messages API as the model (fake_anthropic.py).

One run uses a tool; fails one (a Bash command exiting non-zero: PostToolUseFailure); spawns a
subagent through the Agent tool, which runs a Bash command of its own; asks for a permission Claude
Code's settings do not give (a Write outside ``--allowedTools``: PermissionRequest), which a person
allows on the session page while the hook waits, so the file is written; and runs a command the
server's tool policy marks "ask" (PreToolUse), which the person denies, so it never runs. A second
run compacts the conversation (``/compact`` on ``--resume``: PreCompact, PostCompact). What lands:
each tool call with its status in the session of the agent that made it, the questions and their
answers, the compaction summary as a milestone.
"""

import subprocess
import time
import uuid

import pytest

from ledger.models import ToolInvocation
from sessions_app.models import AgentSession, Milestone, StreamEvent, ToolPolicy
from sessions_app.selectors import session_question
from tests.client.hook_events import SDK_HOOK_EVENTS
from tests.client.hook_person import person_answers, signed_in_engineer
from tests.client.live import agent_key, server_roots, sy_server  # noqa: F401
from tests.runners.claude_cli import claude_env, hook_settings, require_claude, stream_lines
from tests.runners.fake_anthropic import FakeAnthropic, text, tool_use

pytestmark = pytest.mark.django_db(transaction=True)

SUBAGENT_PROMPT = "List the folder and report what is in it"
# Every event but WorktreeCreate (its command hook would replace Claude Code's own worktree creation)
# and SessionEnd (it completes the session, and the second run resumes it).
EVENTS = tuple(name for name in SDK_HOOK_EVENTS if name not in ("WorktreeCreate", "SessionEnd"))
ALLOWED = "Bash(echo:*),Bash(ls:*),Bash(touch:*),Agent"
SUMMARY = "Summary: notes.md written; the touch was refused; ls of a missing folder failed."


@pytest.fixture
def claude_run(sy_server, agent_key, tmp_path):  # noqa: F811 - the live fixtures
    """Start `claude -p PROMPT ...` in a work folder against ``fake``; returns the running process."""
    claude = require_claude()
    workdir = tmp_path / "work"
    workdir.mkdir()

    def start(fake: FakeAnthropic, prompt: str, *args: str) -> subprocess.Popen:
        env = claude_env(
            home=tmp_path / "home",
            api_url=fake.url,
            SWITCHYARD_URL=sy_server.url,
            SWITCHYARD_KEY=agent_key,
            SWITCHYARD_STATE_DIR=str(tmp_path / "switchyard-state"),
            SWITCHYARD_HOOK_BUDGET="5",  # the time they need on a loaded machine
            SWITCHYARD_PERMISSION_TIMEOUT="50",  # below the 60 s Claude Code gives a command hook
        )
        argv = [str(claude), "-p", prompt, "--output-format", "stream-json", "--verbose"]
        argv += ["--permission-mode", "default", "--allowedTools", ALLOWED]
        argv += ["--settings", hook_settings(events=EVENTS), *args]
        return subprocess.Popen(argv, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    start.workdir = workdir
    return start


def _answer_questions(proc: subprocess.Popen, session_id: str, base_url: str, seconds: float = 200) -> list:
    """The person: while Claude Code runs, answer each question the session waits on, on the session
    page: the tool policy's with Deny and a message, Claude Code's own with Allow. Returns what was
    asked, in order: (hook, tool)."""
    cookies = signed_in_engineer()
    asked: list[tuple[str, str]] = []
    deadline = time.monotonic() + seconds
    while proc.poll() is None and time.monotonic() < deadline:
        session = AgentSession.objects.filter(pk=session_id, status="waiting_for_input").first()
        question = session_question(session=session) if session is not None else None
        if question is not None and question.payload.get("choices") == ["allow", "deny"]:
            hook, tool = question.payload.get("hook"), question.payload.get("tool_name")
            asked.append((hook, tool))
            form = {"decision": "deny", "answer": "Not at the top level."} if hook == "PreToolUse" else {}
            response = person_answers(base_url, session_id, cookies, **(form or {"decision": "allow", "answer": ""}))
            assert response.status_code == 302, response.text[:500]
        time.sleep(0.2)
    return asked


def test_a_run_with_a_failure_a_subagent_two_answers_and_a_compaction(claude_run, sy_server):  # noqa: F811
    session = str(uuid.uuid4())
    workdir = claude_run.workdir
    ToolPolicy.objects.create(pattern="Bash(touch *)", note="no new files at the top level")
    main = [
        tool_use("Bash", {"command": "echo ok", "description": "say ok"}),
        tool_use("Bash", {"command": "ls missing-folder", "description": "list a missing folder"}),
        tool_use("Agent", {"subagent_type": "general-purpose", "description": "list", "prompt": SUBAGENT_PROMPT}),
        tool_use("Write", {"file_path": str(workdir / "notes.md"), "content": "# Notes\n"}),
        tool_use("Bash", {"command": "touch top-level.txt", "description": "make a file"}),
        text("Done."),
    ]
    subagent = [tool_use("Bash", {"command": "ls -a", "description": "list"}), text("The folder holds notes.")]
    with FakeAnthropic(main, subagents={SUBAGENT_PROMPT: subagent}) as fake:
        proc = claude_run(fake, "Take notes", "--session-id", session)
        asked = _answer_questions(proc, session, sy_server.url)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, f"{err}\n{fake.describe()}"
    with FakeAnthropic([text(SUMMARY)], tag="compact") as fake:
        proc = claude_run(fake, "/compact", "--resume", session)
        compact_out, compact_err = proc.communicate(timeout=180)
        assert proc.returncode == 0, f"{compact_err}\n{fake.describe()}"

    # The person was asked twice, in order: Claude Code's own permission, then the tool policy's.
    assert asked == [("PermissionRequest", "Write"), ("PreToolUse", "Bash")], out[-3000:]
    assert (workdir / "notes.md").read_text() == "# Notes\n"  # allowed: written for real
    assert not (workdir / "top-level.txt").exists()  # denied: never ran
    assert stream_lines(out)[-1]["result"] == "Done."

    row = AgentSession.objects.get(pk=session)
    (child,) = AgentSession.objects.filter(parent=row)
    calls = {(c.session_id, c.client_id): (c.tool_name, c.status) for c in ToolInvocation.objects.all()}
    assert calls == {
        (session, "toolu_fake_00"): ("Bash", "success"),
        (session, "toolu_fake_01"): ("Bash", "failure"),
        (session, "toolu_fake_02"): ("Agent", "success"),
        (session, "toolu_fake_03"): ("Write", "success"),
        (session, "toolu_fake_04"): ("Bash", "failure"),
        (child.pk, "toolu_fakesub0_00"): ("Bash", "success"),
    }
    failed = ToolInvocation.objects.get(client_id="toolu_fake_01")
    assert "missing-folder" in failed.error
    denied = ToolInvocation.objects.get(client_id="toolu_fake_04")
    assert denied.error.startswith("Denied by eng in Switchyard (Switchyard's tool policy 'Bash(touch *)'")
    assert denied.error.endswith(": Not at the top level.")

    questions = StreamEvent.objects.filter(session=row, type="input_request").exclude(payload__has_key="answer")
    answered = StreamEvent.objects.filter(session=row, type="input_request", payload__has_key="answer")
    assert sorted(q.payload["hook"] for q in questions) == ["PermissionRequest", "PreToolUse"]
    assert sorted(a.payload["decision"] for a in answered) == ["allow", "deny"]
    hooks = set(StreamEvent.objects.filter(session=row).values_list("payload__hook", flat=True))
    assert {"SubagentStart", "SubagentStop", "PreCompact"} <= hooks
    (milestone,) = Milestone.objects.filter(session=row)
    assert milestone.text == f"Context compacted (manual): {SUMMARY}"
