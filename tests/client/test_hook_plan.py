"""`switchyard hook`'s plan: what each Claude Code hook event becomes, as requests, before any is sent.

One fixture per event of the SDK's HOOK_EVENTS (tests/client/hook_events.py), each planned for a
session that is open and running; then the details: subagents, waits, counters, unknown events."""

import json
from urllib.parse import unquote

import pytest

from switchyard_client.hook.plan import EVENTS, SessionMemory, plan, subagent_session_id
from tests.client.hook_events import AGENT_ID, CHILD, FIXTURES, SDK_HOOK_EVENTS, SID, SUBAGENT, UNKNOWN, event


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("SWITCHYARD_STATE_DIR", str(tmp_path))
    monkeypatch.delenv("SWITCHYARD_RUN", raising=False)
    monkeypatch.delenv("SWITCHYARD_SESSION", raising=False)
    monkeypatch.delenv("SWITCHYARD_INTENT", raising=False)


def running() -> SessionMemory:
    memory = SessionMemory(SID)
    memory.set(open="done", status="running")
    return memory


def shape(record: dict) -> tuple:
    """A record as (what, session, detail): enough to read a plan at a glance."""
    parts = record["path"].rstrip("/").split("/")
    body = record.get("body") or {}
    if parts == ["sessions"]:
        return ("open", body["id"], body.get("parent"))
    session, what = unquote(parts[1]), parts[2]
    if what == "events":
        return ("event", session, body["type"], body["payload"]["hook"])
    if what == "transition":
        return ("transition", session, body["status"])
    if what == "milestones":
        return ("milestone", session)
    if what == "tool-calls" and record["method"] == "POST":
        return ("tool_start", session, body["id"])
    if what == "tool-calls":
        return ("tool_finish", session, unquote(parts[3]), body["status"])
    return (record["method"], record["path"])


def log(name: str, type: str = "log", session: str = SID) -> tuple:
    return ("event", session, type, name)


EXPECTED = {
    "Setup": [log("Setup")],
    "SessionStart": [("open", SID, None)],
    "SessionEnd": [("transition", SID, "completed")],
    "InstructionsLoaded": [log("InstructionsLoaded")],
    "UserPromptSubmit": [log("UserPromptSubmit")],
    "UserPromptExpansion": [log("UserPromptExpansion")],
    "PreToolUse": [("tool_start", SID, "toolu_01Bash")],
    "PermissionRequest": [log("PermissionRequest", "input_request"), ("transition", SID, "waiting_for_input")],
    "PostToolUse": [("tool_finish", SID, "toolu_01Bash", "success")],
    "PostToolUseFailure": [("tool_finish", SID, "toolu_02Read", "failure")],
    "PermissionDenied": [("tool_finish", SID, "toolu_03Rm", "failure")],
    "PostToolBatch": [log("PostToolBatch")],
    "PreSkillShellCommand": [log("PreSkillShellCommand")],
    "SubagentStart": [("open", CHILD, SID), log("SubagentStart")],
    "SubagentStop": [log("SubagentStop")],  # of a subagent never seen start: see below
    "Notification": [log("Notification", "input_request")],
    "Elicitation": [log("Elicitation", "input_request"), ("transition", SID, "waiting_for_input")],
    "ElicitationResult": [log("ElicitationResult")],
    "MessageDisplay": [],  # counted, reported at the end of the turn
    "Stop": [("transition", SID, "waiting_for_input")],
    "StopFailure": [log("StopFailure"), ("transition", SID, "waiting_for_input")],
    "PreCompact": [log("PreCompact")],
    "PostCompact": [("milestone", SID)],
    "PreModelSwitch": [log("PreModelSwitch")],
    "PostModelSwitch": [log("PostModelSwitch")],
    "ConfigChange": [log("ConfigChange")],
    "CwdChanged": [log("CwdChanged")],
    "FileChanged": [log("FileChanged")],
    "DirectoryAdded": [log("DirectoryAdded")],
    "WorktreeCreate": [log("WorktreeCreate")],
    "WorktreeRemove": [log("WorktreeRemove")],
    "TeammateIdle": [log("TeammateIdle")],
    "TaskCreated": [log("TaskCreated", "plan_update")],
    "TaskCompleted": [log("TaskCompleted", "plan_update")],
}


def test_there_is_a_fixture_and_a_mapping_for_every_event_of_the_sdk():
    assert len(SDK_HOOK_EVENTS) == 34
    assert sorted(FIXTURES) == sorted(SDK_HOOK_EVENTS) == sorted(EVENTS) == sorted(EXPECTED)
    assert all(payload["hook_event_name"] == name for name, payload in FIXTURES.items())


@pytest.mark.parametrize("name", SDK_HOOK_EVENTS)
def test_each_event_becomes_these_requests(name):
    records = plan(json.loads(json.dumps(FIXTURES[name])), running())

    assert [shape(r) for r in records] == EXPECTED[name]
    json.dumps(records)  # everything planned can be spooled as JSON


def payload_of(records: list[dict], index: int = 0) -> dict:
    return records[index]["body"]["payload"]


def test_the_documented_fields_are_kept():
    assert payload_of(plan(FIXTURES["Setup"], running())) == {"hook": "Setup", "trigger": "init"}
    assert payload_of(plan(FIXTURES["UserPromptExpansion"], running())) == {
        "hook": "UserPromptExpansion",
        "expansion_type": "slash_command",
        "command_name": "review",
        "command_args": "auth",
        "command_source": "project",
        "prompt": "Review the auth module for session handling bugs",
    }
    assert payload_of(plan(FIXTURES["StopFailure"], running())) == {
        "hook": "StopFailure",
        "error": "rate_limit",
        "error_details": "429 rate_limit_error: This request would exceed the rate limit",
        "last_assistant_message": "",
    }
    assert payload_of(plan(FIXTURES["PostModelSwitch"], running())) == {
        "hook": "PostModelSwitch",
        "from_model": "claude-sonnet-4-5-20250929",
        "to_model": "claude-opus-4-1-20250805",
        "requested_model": "opus",
        "source": "command",
        "context_tokens": 48210,
        "estimated_cache_write_usd": 0.9,
    }
    assert payload_of(plan(FIXTURES["TaskCompleted"], running())) == {
        "hook": "TaskCompleted",
        "task_id": "3",
        "task_subject": "Renew the cookie on refresh",
        "teammate_name": "tester",
        "team_name": "login-fix",
        "status": "completed",
    }
    batch = payload_of(plan(FIXTURES["PostToolBatch"], running()))
    assert batch == {"hook": "PostToolBatch", "count": 2, "tool_use_ids": ["toolu_01Bash", "toolu_02Read"]}
    request = payload_of(plan(FIXTURES["PermissionRequest"], running()))
    assert (request["question"], request["tool_name"], request["tool_input"]) == (
        "Allow Bash?",
        "Bash",
        FIXTURES["PermissionRequest"]["tool_input"],
    )


def test_a_failed_tool_call_carries_its_error_and_an_interrupt_says_so():
    (failure,) = plan(FIXTURES["PostToolUseFailure"], running())
    assert (failure["body"]["status"], failure["body"]["error"]) == ("failure", "File does not exist.")
    assert failure["on_404"]["body"]["id"] == "toolu_02Read"  # the start never arrived: recorded finished

    interrupted = {**FIXTURES["PostToolUseFailure"], "is_interrupt": True, "error": "Interrupted by user"}
    assert plan(interrupted, running())[0]["body"]["error"] == "interrupted: Interrupted by user"

    (denied,) = plan(FIXTURES["PermissionDenied"], running())
    assert denied["body"]["error"] == "permission denied: auto mode: deleting files needs a person's approval"


def test_post_compact_becomes_a_milestone_with_the_summary():
    (milestone,) = plan(FIXTURES["PostCompact"], running())

    assert milestone["body"]["text"] == f"Context compacted (auto): {FIXTURES['PostCompact']['compact_summary']}"
    huge = {**FIXTURES["PostCompact"], "compact_summary": "x" * 50_000}
    assert len(plan(huge, running())[0]["body"]["text"]) == 10_000  # the milestone API's limit


def test_an_unknown_event_is_stored_as_a_log_with_its_payload_capped():
    (record,) = plan(UNKNOWN, running())

    assert shape(record) == log("PreTeleport")
    body = payload_of([record])
    assert isinstance(body["payload"], str) and len(body["payload"]) == 16_000
    assert body["truncated_from_chars"] > 30_000
    small = event("PreTeleport", destination="mars")
    assert payload_of(plan(small, running())) == {"hook": "PreTeleport", "payload": {"destination": "mars"}}
    nameless = {"session_id": SID, "whatever": 1}
    assert payload_of(plan(nameless, running())) == {"hook": "unknown", "payload": {"whatever": 1}}


def test_a_subagents_tool_calls_go_to_its_child_session_even_interleaved_with_the_main_ones():
    memory = running()
    first = plan(event("PreToolUse", tool_name="Grep", tool_use_id="s1", **SUBAGENT), memory)
    main = plan(event("PreToolUse", tool_name="Read", tool_use_id="m1"), memory)
    second = plan(event("PostToolUse", tool_name="Grep", tool_use_id="s1", tool_response="ok", **SUBAGENT), memory)

    # Seen first through a tool call (SubagentStart not hooked): opened then, once.
    assert [shape(r) for r in first] == [("open", CHILD, SID), ("tool_start", CHILD, "s1")]
    assert [shape(r) for r in main] == [("tool_start", SID, "m1")]
    assert [shape(r) for r in second] == [("tool_finish", CHILD, "s1", "success")]
    assert first[0]["body"]["metadata"]["agent_type"] == "Explore"


def test_subagent_ids_stay_within_the_servers_session_id_rules():
    assert subagent_session_id(SID, AGENT_ID) == CHILD
    odd = subagent_session_id(SID, "agent/with spaces" + "x" * 200)
    assert len(odd) <= 128 and odd.startswith(SID + ":sub-")
    assert all(c.isalnum() or c in "._:-" for c in odd)


def test_a_permission_wait_ends_when_the_tool_runs_but_a_finished_turn_waits_for_a_prompt():
    memory = running()
    plan(FIXTURES["PermissionRequest"], memory)
    after = plan(FIXTURES["PostToolUse"], memory)
    assert [shape(r) for r in after] == [
        ("transition", SID, "running"),
        ("tool_finish", SID, "toolu_01Bash", "success"),
    ]

    plan(FIXTURES["Stop"], memory)
    assert [shape(r) for r in plan(FIXTURES["PreToolUse"], memory)] == [("tool_start", SID, "toolu_01Bash")]
    assert [shape(r) for r in plan(FIXTURES["UserPromptSubmit"], memory)] == [
        ("transition", SID, "running"),
        log("UserPromptSubmit"),
    ]


def test_message_display_is_counted_and_reported_once_when_the_turn_ends():
    memory = running()
    for index, final in enumerate([False, False, True, False, True]):
        assert plan({**FIXTURES["MessageDisplay"], "index": index, "final": final}, memory) == []

    stop = plan(FIXTURES["Stop"], memory)
    assert [shape(r) for r in stop] == [log("MessageDisplay"), ("transition", SID, "waiting_for_input")]
    assert payload_of(stop) == {"hook": "MessageDisplay", "messages": 2, "deltas": 5}
    assert [shape(r) for r in plan(FIXTURES["SessionEnd"], memory)] == [("transition", SID, "completed")]


def test_memory_survives_between_processes():
    memory = running()
    plan(FIXTURES["SubagentStart"], memory)
    plan(FIXTURES["MessageDisplay"], memory)
    memory.save()

    again = SessionMemory(SID)
    assert [shape(r) for r in plan(event("PreToolUse", tool_use_id="s2", tool_name="Grep", **SUBAGENT), again)] == [
        ("tool_start", CHILD, "s2")
    ]
    assert again.get("displayed") == {"messages": 1, "deltas": 1}


def test_inside_a_run_subagents_are_children_of_the_runs_session(monkeypatch):
    monkeypatch.setenv("SWITCHYARD_RUN", "7")
    monkeypatch.setenv("SWITCHYARD_SESSION", "session_run")
    memory = SessionMemory(SID)

    start = plan(FIXTURES["SubagentStart"], memory)
    request = plan(FIXTURES["PermissionRequest"], memory)

    plan(FIXTURES["MessageDisplay"], memory)
    stop = plan(FIXTURES["Stop"], memory)

    child = f"session_run:{AGENT_ID}"
    assert [shape(r) for r in stop] == [
        log("MessageDisplay", session="session_run"),
        log("Stop", session="session_run"),
    ]
    assert [shape(r) for r in start] == [("open", child, "session_run"), log("SubagentStart", session="session_run")]
    # The runner owns the run's session status, but for a permission request: a person answers it
    # on the card, so the session waits for input there too (issue 15, part 2).
    assert [shape(r) for r in request] == [
        log("PermissionRequest", "input_request", session="session_run"),
        ("transition", "session_run", "waiting_for_input"),
    ]


def test_a_subagent_seen_to_start_is_completed_by_its_stop_and_one_never_seen_is_only_noted():
    memory = running()
    plan(FIXTURES["SubagentStart"], memory)

    stop = plan(FIXTURES["SubagentStop"], memory)
    # Claude Code's own helpers (the compaction's summarizer) stop without starting, with no type.
    helper = plan(event("SubagentStop", agent_id="aed9328c803fa0338", agent_type="", stop_hook_active=False), memory)

    assert [shape(r) for r in stop] == [("transition", CHILD, "completed"), log("SubagentStop")]
    assert payload_of(stop, 1) == {
        "hook": "SubagentStop",
        "agent_id": AGENT_ID,
        "agent_type": "Explore",
        "session": CHILD,
        "agent_transcript_path": FIXTURES["SubagentStop"]["agent_transcript_path"],
        "last_assistant_message": FIXTURES["SubagentStop"]["last_assistant_message"],
    }
    assert [shape(r) for r in helper] == [log("SubagentStop")]
    assert "session" not in payload_of(helper)


BASH_RM = {"command": "rm -rf build", "description": "clean"}
NEEDS_APPROVAL = "rm in '/w/build' needs approval."


def test_a_permission_never_granted_finishes_the_call_when_its_batch_resolves():
    # As Claude Code 2.1.332 runs headless: PreToolUse, PermissionRequest, then no PostToolUse at all.
    memory = running()
    plan(event("PreToolUse", tool_name="Bash", tool_input=BASH_RM, tool_use_id="toolu_rm"), memory)
    plan(event("PermissionRequest", tool_name="Bash", tool_input=BASH_RM), memory)
    call = {"tool_name": "Bash", "tool_input": BASH_RM, "tool_use_id": "toolu_rm", "tool_response": NEEDS_APPROVAL}
    other = {"tool_name": "Read", "tool_input": {"file_path": "a"}, "tool_use_id": "toolu_r", "tool_response": "a"}

    batch = plan(event("PostToolBatch", tool_calls=[other, call]), memory)

    assert [shape(r) for r in batch] == [log("PostToolBatch"), ("tool_finish", SID, "toolu_rm", "failure")]
    assert batch[1]["body"]["error"] == f"permission not granted: {NEEDS_APPROVAL}"
    assert batch[1]["ok_statuses"] == [409]
    assert memory.get("asked") == []


def test_a_permission_granted_leaves_the_batch_alone():
    memory = running()
    plan(event("PermissionRequest", tool_name="Bash", tool_input=BASH_RM), memory)
    plan(event("PostToolUse", tool_name="Bash", tool_input=BASH_RM, tool_use_id="toolu_rm", tool_response="ok"), memory)
    call = {"tool_name": "Bash", "tool_input": BASH_RM, "tool_use_id": "toolu_rm", "tool_response": "ok"}

    assert [shape(r) for r in plan(event("PostToolBatch", tool_calls=[call]), memory)] == [log("PostToolBatch")]
