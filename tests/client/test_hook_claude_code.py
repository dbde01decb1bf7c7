"""The real Claude Code CLI (claude_cli.py's pinned 2.1.332) against a scripted Messages API, with every
hook event wired to `switchyard hook` and reporting to the live app: the payloads are Claude Code's own.

One run uses a tool, fails one (a Read of a missing file), spawns a subagent through the Agent tool
(which runs a tool of its own, in the background, while the main agent goes on) and asks for a
permission it never gets (headless: no one answers); a second run compacts the conversation. What
lands: the tool calls, each in the session of the agent that made it; the failure's error; the
unanswered call finished; the question; the compaction summary as a milestone; the session ended.
"""

import json
import subprocess
import uuid

import pytest

from ledger.models import ToolInvocation
from sessions_app.models import AgentSession, Milestone, StreamEvent
from tests.client.hook_events import SDK_HOOK_EVENTS
from tests.client.live import agent_key, server_roots, sy, sy_server  # noqa: F401
from tests.runners.claude_cli import claude_env, hook_settings, require_claude
from tests.runners.fake_anthropic import FakeAnthropic, text, tool_results, tool_use

pytestmark = pytest.mark.django_db(transaction=True)

SUBAGENT_PROMPT = "Find where the session cookie is renewed"
# Every event but WorktreeCreate, whose command hook would replace Claude Code's own worktree creation.
EVENTS = tuple(name for name in SDK_HOOK_EVENTS if name != "WorktreeCreate")


class FakeWithSubagent(FakeAnthropic):
    """The main conversation follows ``script``; the subagent's (the request whose first message is
    its prompt) follows ``subagent``, with tool use ids ``toolu_sub_NN``."""

    def __init__(self, script, subagent, **kwargs):
        super().__init__(script, **kwargs)
        self.subagent = subagent

    @staticmethod
    def _is_subagent(body: dict) -> bool:
        messages = body.get("messages") or []
        return bool(messages) and SUBAGENT_PROMPT in json.dumps(messages[0])

    def reply_for(self, body):
        if self._is_subagent(body):
            index = tool_results(body, "toolu_sub_")
            return (self.subagent[index] if index < len(self.subagent) else text("(ended)")), False
        return super().reply_for(body)

    def message(self, body, reply, index):
        if not self._is_subagent(body):
            return super().message(body, reply, index)
        main_prefix, self.prefix = self.prefix, "toolu_sub_"
        try:
            return super().message(body, reply, tool_results(body, "toolu_sub_"))
        finally:
            self.prefix = main_prefix


@pytest.fixture
def run_claude(sy_server, agent_key, tmp_path):  # noqa: F811 - the live fixtures
    claude = require_claude()
    workdir = tmp_path / "work"
    workdir.mkdir()

    def run(
        fake: FakeAnthropic, prompt: str, *args: str, events: tuple[str, ...] = EVENTS
    ) -> subprocess.CompletedProcess:
        env = claude_env(
            home=tmp_path / "home",
            api_url=fake.url,
            SWITCHYARD_URL=sy_server.url,
            SWITCHYARD_KEY=agent_key,
            SWITCHYARD_STATE_DIR=str(tmp_path / "switchyard-state"),
            SWITCHYARD_HOOK_BUDGET="5",  # the time they need on a loaded machine
            SWITCHYARD_PERMISSION_TIMEOUT="0",  # record permission requests, wait for no answer
        )
        argv = [str(claude), "-p", prompt, "--output-format", "stream-json", "--verbose"]
        argv += ["--allowedTools", "Bash(echo:*),Read,Grep,Agent", "--settings", hook_settings(events=events), *args]
        return subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True, timeout=240)

    run.state = tmp_path / "switchyard-state"
    return run


def test_claude_codes_own_hook_payloads_land_where_the_table_says(run_claude, sy):  # noqa: F811
    session = str(uuid.uuid4())
    main = [
        tool_use("Bash", {"command": "echo ok", "description": "say ok"}),
        tool_use("Read", {"file_path": "/nonexistent/auth/missing.py"}),
        tool_use("Agent", {"subagent_type": "general-purpose", "description": "find renew", "prompt": SUBAGENT_PROMPT}),
        tool_use("Bash", {"command": "rm -rf build", "description": "clean the build"}),
        text("Done."),
    ]
    subagent = [tool_use("Grep", {"pattern": "renew", "path": "."}), text("renew() is in auth/session.py")]
    with FakeWithSubagent(main, subagent) as fake:
        # Without SessionEnd: it would complete the session, and a completed session takes nothing more
        # (SessionEnd fires at the end of every `claude -p`, also of one that is resumed later).
        first_run = tuple(name for name in EVENTS if name != "SessionEnd")
        done = run_claude(fake, "Find out why login fails", "--session-id", session, events=first_run)
        assert done.returncode == 0, f"{done.stderr}\n{fake.describe()}"
    with FakeAnthropic([text("Summary: login fails because renew() runs on login only.")], tag="compact") as fake:
        done = run_claude(fake, "/compact", "--resume", session)
        assert done.returncode == 0, f"{done.stderr}\n{fake.describe()}"

    # The main session and one subagent session under it; the compaction's own helpers made none.
    row = AgentSession.objects.get(pk=session)
    (child,) = AgentSession.objects.filter(parent=row)
    assert AgentSession.objects.count() == 2
    assert row.status == "completed"
    assert (child.status, child.labels, child.metadata["agent_type"]) == ("completed", ["subagent"], "general-purpose")
    assert child.pk == f"{session}:{child.metadata['agent_id']}"

    calls = {(c.session_id, c.client_id): (c.tool_name, c.status) for c in ToolInvocation.objects.all()}
    assert calls == {
        (session, "toolu_fake_00"): ("Bash", "success"),
        (session, "toolu_fake_01"): ("Read", "failure"),
        (session, "toolu_fake_02"): ("Agent", "success"),
        (session, "toolu_fake_03"): ("Bash", "failure"),
        (child.pk, "toolu_sub_00"): ("Grep", "success"),  # the subagent's, while the main agent went on
    }
    read = ToolInvocation.objects.get(client_id="toolu_fake_01")
    assert read.error.startswith("File does not exist.")
    rm = ToolInvocation.objects.get(client_id="toolu_fake_03")
    assert rm.error.startswith("permission not granted: ") and "needs approval" in rm.error
    assert sy.session_resume(session)["open_tool_calls"] == []

    hooks = list(StreamEvent.objects.filter(session=row).values_list("type", "payload__hook"))
    assert ("input_request", "PermissionRequest") in hooks
    assert ("log", "SubagentStart") in hooks and ("log", "SubagentStop") in hooks
    assert ("log", "PreCompact") in hooks and ("log", "MessageDisplay") in hooks
    question = StreamEvent.objects.get(session=row, payload__hook="PermissionRequest").payload
    assert (question["question"], question["tool_input"]["command"]) == ("Allow Bash?", "rm -rf build")
    (milestone,) = Milestone.objects.filter(session=row)
    assert milestone.text == "Context compacted (manual): Summary: login fails because renew() runs on login only."
    assert not (run_claude.state / "spool.jsonl").exists()  # nothing left unsent
