"""Every Claude Code hook event through `switchyard hook` against the live server, a new process per
payload as Claude Code runs it: what lands in the database; the same session sent while Switchyard is
down and replayed from the spool, in order; subagents' tool calls in their own sessions however
interleaved, and resume listing the subagents' open calls."""

import json
import os
import subprocess
import sys
import time

import pytest

from ledger.models import ToolInvocation
from sessions_app.models import AgentSession, Milestone, StreamEvent
from tests.client.hook_events import AGENT_ID, BASE, CHILD, CWD, SID, SUBAGENT, SUMMARY, UNKNOWN, event, one_session

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def hook(tmp_path, agent_key):
    """Run `switchyard hook` as Claude Code does; (exit code, stderr, seconds)."""
    state = tmp_path / "hook-state"

    def run(payload: dict, *, url: str, budget: float | None = None) -> tuple[int, str, float]:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(tmp_path),
            "SWITCHYARD_URL": url,
            "SWITCHYARD_KEY": agent_key,
            "SWITCHYARD_STATE_DIR": str(state),
            "SWITCHYARD_PERMISSION_TIMEOUT": "0",  # record permission requests, wait for no answer
        }
        if budget is not None:
            env["SWITCHYARD_HOOK_BUDGET"] = str(budget)
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "switchyard_client.cli", "hook"],
            input=json.dumps(payload),
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        return done.returncode, done.stderr, time.monotonic() - started

    run.spool = state / "spool.jsonl"
    return run


def hooks_of(session_id: str) -> list[tuple[str, str | None]]:
    """The session's stream as (type, the hook it came from, or the move of a status change)."""
    rows = StreamEvent.objects.filter(session_id=session_id).order_by("seq")
    return [
        (
            row.type,
            f"{row.payload['from']}->{row.payload['to']}" if row.type == "status_change" else row.payload.get("hook"),
        )
        for row in rows
    ]


MAIN_STREAM = [
    ("log", "Setup"),
    ("log", "InstructionsLoaded"),
    ("log", "UserPromptSubmit"),
    ("log", "UserPromptExpansion"),
    ("input_request", "PermissionRequest"),
    ("status_change", "running->waiting_for_input"),
    ("status_change", "waiting_for_input->running"),  # the tool ran: permission given
    ("log", "PostToolBatch"),
    ("log", "PreSkillShellCommand"),
    ("log", "SubagentStart"),
    ("log", "SubagentStop"),
    ("input_request", "Notification"),
    ("input_request", "Elicitation"),
    ("status_change", "running->waiting_for_input"),
    ("log", "ElicitationResult"),
    ("status_change", "waiting_for_input->running"),
    ("log", "MessageDisplay"),  # two displays, one line
    ("status_change", "running->waiting_for_input"),  # Stop
    ("status_change", "waiting_for_input->running"),  # the next prompt
    ("log", "UserPromptSubmit"),
    ("log", "StopFailure"),
    ("status_change", "running->waiting_for_input"),
    ("log", "PreCompact"),
    ("milestone", None),
    ("status_change", "waiting_for_input->running"),  # SessionStart source=compact
    ("log", "PreModelSwitch"),
    ("log", "PostModelSwitch"),
    ("log", "ConfigChange"),
    ("log", "CwdChanged"),
    ("log", "FileChanged"),
    ("log", "DirectoryAdded"),
    ("log", "WorktreeCreate"),
    ("log", "WorktreeRemove"),
    ("log", "TeammateIdle"),
    ("plan_update", "TaskCreated"),
    ("plan_update", "TaskCompleted"),
    ("log", "PreTeleport"),
    ("status_change", "running->completed"),
]


def assert_the_whole_session_landed() -> None:
    main = AgentSession.objects.get(pk=SID)
    assert (main.status, main.parent_id) == ("completed", None)
    # Opened by Setup, which comes before SessionStart: SessionStart's model is not there to add.
    assert main.metadata == {"client": "claude-code", "cwd": CWD, "transcript_path": BASE["transcript_path"]}
    child = AgentSession.objects.get(pk=CHILD)
    assert (child.status, child.parent_id, child.labels, child.agent_id) == (
        "completed",
        SID,
        ["subagent"],
        main.agent_id,
    )
    assert (child.metadata["agent_id"], child.metadata["agent_type"]) == (AGENT_ID, "Explore")
    assert AgentSession.objects.count() == 2

    calls = {
        c.client_id: (c.session_id, c.tool_name, c.status, c.error)
        for c in ToolInvocation.objects.all()
    }  # fmt: skip
    assert calls == {
        "toolu_01Bash": (SID, "Bash", "success", ""),
        "toolu_02Read": (SID, "Read", "failure", "File does not exist."),
        "toolu_03Rm": (
            SID,
            "Bash",
            "failure",
            "permission denied: auto mode: deleting files needs a person's approval",
        ),
        "toolu_06Task": (SID, "Task", "success", ""),
        "toolu_05Read": (SID, "Read", "success", ""),
        "toolu_S1Grep": (CHILD, "Grep", "success", ""),  # the subagent's, between the main agent's
    }

    assert hooks_of(SID) == MAIN_STREAM
    assert hooks_of(CHILD) == [("status_change", "running->completed")]
    (milestone,) = Milestone.objects.filter(session_id=SID)
    assert milestone.text == f"Context compacted (auto): {SUMMARY}"

    unknown = StreamEvent.objects.get(session_id=SID, payload__hook="PreTeleport").payload
    raw = json.dumps({k: UNKNOWN[k] for k in ("destination", "api_key", "notes")}, ensure_ascii=False)
    assert unknown["truncated_from_chars"] == len(raw)
    # Capped to 16,000 characters by the hook, then the key redacted by the server (shorter still).
    assert unknown["payload"] == raw[:16_000].replace(UNKNOWN["api_key"], "[REDACTED]")
    stop = StreamEvent.objects.get(session_id=SID, payload__hook="SubagentStop").payload
    assert (stop["session"], stop["agent_type"]) == (CHILD, "Explore")
    display = StreamEvent.objects.get(session_id=SID, payload__hook="MessageDisplay").payload
    assert display == {"hook": "MessageDisplay", "messages": 1, "deltas": 2}


# What lands, not how fast: the hook's own budget (0.8 s) turns an answer slowed by a loaded machine
# into a spooled request (seen in CI); tests/client/test_hook.py holds the budget itself.
LANDS_BUDGET = 10


def test_every_hook_event_of_a_session_lands_as_its_table_says(hook, sy_server):
    for payload in one_session():
        code, stderr, _ = hook(payload, url=sy_server.url, budget=LANDS_BUDGET)
        assert (code, stderr) == (0, ""), payload["hook_event_name"]

    assert_the_whole_session_landed()


def test_sent_while_switchyard_is_down_the_whole_session_replays_from_the_spool_in_order(hook, sy_server, dead_url):
    *offline, last = one_session()
    for payload in offline:
        code, stderr, seconds = hook(payload, url=dead_url)
        assert code == 0 and "spooled" in stderr, payload["hook_event_name"]
    spooled = [json.loads(line) for line in hook.spool.read_text().splitlines()]
    # Every request of the session but SessionEnd's: 45 payloads, 54 requests (the two MessageDisplays
    # none; Setup, SubagentStart, SubagentStop, the permission and elicitation waits and their ends two).
    assert len(spooled) == 54
    assert [r["body"].get("id") for r in spooled if r["path"] == "sessions/"] == [SID, SID, CHILD, SID]
    assert AgentSession.objects.count() == 0

    # Back up: the next call sends the spool first, then its own, in order (a budget for ~60 requests).
    code, stderr, _ = hook(last, url=sy_server.url, budget=20)

    assert (code, stderr) == (0, "")
    assert not hook.spool.exists()
    assert_the_whole_session_landed()


def test_interleaved_subagents_keep_their_own_calls_and_resume_lists_their_open_ones(hook, sy_server, sy):
    other = {"agent_id": "b7e1d93c05a2f468", "agent_type": "general-purpose"}
    steps = [
        event("SessionStart", source="startup"),
        event("SubagentStart", **SUBAGENT),
        event("SubagentStart", **other),
        event("PreToolUse", tool_name="Grep", tool_input={"pattern": "a"}, tool_use_id="toolu_a1", **SUBAGENT),
        event("PreToolUse", tool_name="Bash", tool_input={"command": "ls"}, tool_use_id="toolu_b1", **other),
        event("PreToolUse", tool_name="Read", tool_input={"file_path": f"{CWD}/x"}, tool_use_id="toolu_m1"),
        event("PostToolUse", tool_name="Bash", tool_use_id="toolu_b1", tool_response={"stdout": "x"}, **other),
        event("PreToolUse", tool_name="Glob", tool_input={"pattern": "*.py"}, tool_use_id="toolu_b2", **other),
        event("PostToolUse", tool_name="Read", tool_use_id="toolu_m1", tool_response={"type": "text"}),
        event("PreToolUse", tool_name="Read", tool_input={"file_path": f"{CWD}/y"}, tool_use_id="toolu_m2"),
    ]
    for payload in steps:
        assert hook(payload, url=sy_server.url, budget=LANDS_BUDGET)[:2] == (0, ""), payload["hook_event_name"]

    second = f"{SID}:b7e1d93c05a2f468"
    calls = {c.client_id: (c.session_id, c.status) for c in ToolInvocation.objects.all()}
    assert calls == {
        "toolu_a1": (CHILD, "running"),
        "toolu_b1": (second, "success"),
        "toolu_b2": (second, "running"),
        "toolu_m1": (SID, "success"),
        "toolu_m2": (SID, "running"),
    }
    assert set(AgentSession.objects.filter(parent_id=SID).values_list("pk", flat=True)) == {CHILD, second}

    resume = sy.session_resume(SID)
    assert [(c["client_id"], c["session"]) for c in resume["open_tool_calls"]] == [
        ("toolu_a1", CHILD),
        ("toolu_b2", second),
        ("toolu_m2", SID),
    ]
    # A subagent's own resume lists its own open calls only.
    assert [c["client_id"] for c in sy.session_resume(CHILD)["open_tool_calls"]] == ["toolu_a1"]
