"""The real Claude Code CLI, headless, against a scripted Messages API (fake_anthropic.py), with its
hooks wired to `switchyard hook` and reporting to the live app.

What the runner's Claude provider relies on, checked on the pinned version (claude_cli.py): `claude -p
... --output-format stream-json --verbose --allowedTools Bash --settings <hooks>` runs the tool for real
in its working directory, fires SessionStart, PreToolUse, PostToolUse and Stop, whose `switchyard hook`
lands them in Switchyard as the session, a tool call and status changes; `--session-id` names the
session; `--resume` continues it; stdout ends with a `result` line carrying `total_cost_usd`.
"""

import subprocess
import uuid

import pytest

from ledger.models import ToolInvocation
from sessions_app.models import AgentSession
from tests.client.live import agent_key, server_roots, sy_server  # noqa: F401
from tests.runners.claude_cli import claude_env, hook_settings, require_claude, stream_lines
from tests.runners.fake_anthropic import FakeAnthropic, text, tool_use
from tests.workspaces.conftest import commit_file, git

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def claude():
    return require_claude()


@pytest.fixture
def workdir(tmp_path):
    folder = tmp_path / "work"
    folder.mkdir()
    git(folder, "init", "-q", "-b", "main")
    commit_file(folder, "README.md", "# Shop\n", "initial")
    return folder


@pytest.fixture
def run_claude(claude, sy_server, agent_key, tmp_path, workdir):  # noqa: F811 - the live fixtures
    """Run `claude -p PROMPT ...` in ``workdir`` against ``fake``; returns (exit code, stdout, stderr)."""

    def run(fake: FakeAnthropic, prompt: str, *args: str, session: str) -> subprocess.CompletedProcess:
        env = claude_env(
            home=tmp_path / "home",
            api_url=fake.url,
            SWITCHYARD_URL=sy_server.url,
            SWITCHYARD_KEY=agent_key,
            SWITCHYARD_SESSION=session,
            SWITCHYARD_STATE_DIR=str(tmp_path / "switchyard-state"),
            SWITCHYARD_INTENT="Fix the login bug",
            # The hooks have the time they need on a loaded CI machine.
            SWITCHYARD_HOOK_BUDGET="5",
        )
        argv = [str(claude), "-p", prompt, "--output-format", "stream-json", "--verbose"]
        argv += ["--allowedTools", "Bash", "--settings", hook_settings(), *args]
        return subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True, timeout=180)

    return run


def test_claude_code_runs_the_tool_and_its_hooks_report_to_switchyard(run_claude, workdir):
    session = str(uuid.uuid4())
    script = [
        tool_use("Bash", {"command": "echo 'made by claude' > notes.txt", "description": "write the notes"}),
        text("Done: notes.txt is written."),
    ]
    with FakeAnthropic(script) as fake:
        done = run_claude(fake, "Write notes.txt", "--session-id", session, session=session)
        traffic = fake.describe()
        main = fake.main_requests()

    assert done.returncode == 0, f"{done.stderr}\n{traffic}"
    # The tool ran for real, in the working directory.
    assert (workdir / "notes.txt").read_text() == "made by claude\n"
    # The conversation: the tool use first, then the request carrying its result got the final text.
    assert len(main) == 2, traffic
    results = [b for m in main[1].body["messages"] for b in m["content"] if isinstance(m["content"], list)]
    assert any(b.get("type") == "tool_result" and b.get("tool_use_id") == "toolu_fake_00" for b in results)

    lines = stream_lines(done.stdout)
    # `system/init` opens the stream (after the lines of the SessionStart hook, with --verbose).
    init = next(line for line in lines if line["type"] == "system" and line.get("subtype") == "init")
    assert init["session_id"] == session and "Bash" in init["tools"]
    assert lines.index(init) < min(i for i, line in enumerate(lines) if line["type"] == "assistant")
    final = lines[-1]
    assert final["type"] == "result" and final["subtype"] == "success" and not final["is_error"]
    assert final["result"] == "Done: notes.txt is written."
    assert final["total_cost_usd"] > 0
    tool_uses = [
        block
        for line in lines
        if line["type"] == "assistant"
        for block in line["message"]["content"]
        if block["type"] == "tool_use"
    ]
    assert [(b["id"], b["name"]) for b in tool_uses] == [("toolu_fake_00", "Bash")]

    # The hooks: SessionStart opened the session under Claude Code's id, PreToolUse/PostToolUse made
    # one finished tool call keyed by the tool_use_id, Stop left the session waiting for input.
    row = AgentSession.objects.get(pk=session)
    assert row.agent.slug == "claude-1"
    assert row.metadata["client"] == "claude-code" and row.metadata["cwd"] == str(workdir)
    call = ToolInvocation.objects.get(session=row)
    assert (call.client_id, call.tool_name, call.status) == ("toolu_fake_00", "Bash", "success")
    assert "made by claude" in str(call.input_summary)
    assert row.status == "waiting_for_input"
    changes = list(row.events.filter(type="status_change").values_list("payload", flat=True))
    assert any(change.get("to") == "waiting_for_input" for change in changes), changes


def test_resume_continues_the_same_session(run_claude, workdir):
    session = str(uuid.uuid4())
    first = [tool_use("Bash", {"command": "echo one > one.txt"}), text("One.")]
    with FakeAnthropic(first) as fake:
        assert run_claude(fake, "Write one.txt", "--session-id", session, session=session).returncode == 0

    second = [tool_use("Bash", {"command": "git add one.txt && git commit -qm 'one'"}), text("Committed.")]
    with FakeAnthropic(second, tag="resumed") as fake:
        done = run_claude(fake, "Commit it", "--resume", session, session=session)
        main = fake.main_requests()
        assert done.returncode == 0, f"{done.stderr}\n{fake.describe()}"

    final = stream_lines(done.stdout)[-1]
    assert final["session_id"] == session and final["result"] == "Committed."
    assert git(workdir, "log", "--format=%s", "-1").strip() == "one"
    # The resumed conversation carried the first run's tool result along with the new one.
    carried = [
        b.get("tool_use_id") for m in main[-1].body["messages"] if isinstance(m["content"], list) for b in m["content"]
    ]
    assert "toolu_fake_00" in carried and "toolu_resumed_00" in carried
    calls = ToolInvocation.objects.filter(session_id=session).order_by("id")
    assert [c.status for c in calls] == ["success", "success"]
    assert AgentSession.objects.get(pk=session).status == "waiting_for_input"
