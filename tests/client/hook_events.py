"""A payload per Claude Code hook event, shaped as Claude Code sends it: the fields of each
``*HookInput`` type in ``@anthropic-ai/claude-agent-sdk`` 0.3.332's sdk.d.ts (the SDK of Claude
Code 2.1.332), on top of ``BaseHookInput`` (session_id, transcript_path, cwd, permission_mode...).

``SDK_HOOK_EVENTS`` is that version's ``HOOK_EVENTS`` list, copied; the tests hold the fixtures and
the hook's own table (``hook.plan.EVENTS``) to it, so a newer list is noticed. ``one_session()``
strings them into one plausible session (every event at least once, a subagent among them).
"""

SDK_VERSION = "0.3.332"
SDK_HOOK_EVENTS = [
    "PreToolUse", "PostToolUse", "PostToolUseFailure", "PostToolBatch", "Notification", "UserPromptSubmit",
    "UserPromptExpansion", "SessionStart", "SessionEnd", "Stop", "StopFailure", "SubagentStart", "SubagentStop",
    "PreCompact", "PostCompact", "PreModelSwitch", "PostModelSwitch", "PermissionRequest", "PermissionDenied",
    "Setup", "TeammateIdle", "TaskCreated", "TaskCompleted", "Elicitation", "ElicitationResult", "ConfigChange",
    "WorktreeCreate", "WorktreeRemove", "InstructionsLoaded", "CwdChanged", "FileChanged", "DirectoryAdded",
    "MessageDisplay", "PreSkillShellCommand",
]  # fmt: skip

SID = "8d2e4f60-1a3b-4c5d-9e7f-0a1b2c3d4e5f"
CWD = "/home/dev/projects/webapp"
AGENT_ID = "a4f9c2e17b3d5081"
CHILD = f"{SID}:{AGENT_ID}"
BASE = {
    "session_id": SID,
    "transcript_path": f"/home/dev/.claude/projects/-home-dev-projects-webapp/{SID}.jsonl",
    "cwd": CWD,
    "permission_mode": "default",
}
SUBAGENT = {"agent_id": AGENT_ID, "agent_type": "Explore"}
BASH = {"command": "pytest -q tests/auth", "description": "Run the auth tests"}
SUMMARY = "The user asked why login fails. The session cookie is not renewed after refresh; tests in tests/auth."
MODEL_SWITCH = {
    "from_model": "claude-sonnet-4-5-20250929",
    "to_model": "claude-opus-4-1-20250805",
    "requested_model": "opus",
    "context_tokens": 48210,
    "prompt_cache_warm": True,
    "cache_ttl": "5m",
    "estimated_cache_write_usd": 0.9,
    "pricing": "catalog",
}


def event(hook_event_name: str, /, **fields) -> dict:
    return {**BASE, "hook_event_name": hook_event_name, **fields}


FIXTURES: dict[str, dict] = {
    "Setup": event("Setup", trigger="init"),
    "SessionStart": event("SessionStart", source="startup", model="claude-sonnet-4-5-20250929"),
    "InstructionsLoaded": event(
        "InstructionsLoaded", file_path=f"{CWD}/CLAUDE.md", memory_type="Project", load_reason="session_start"
    ),
    "UserPromptSubmit": event("UserPromptSubmit", prompt="Find out why login fails", prompt_id="p-1"),
    "UserPromptExpansion": event(
        "UserPromptExpansion",
        expansion_type="slash_command",
        command_name="review",
        command_args="auth",
        command_source="project",
        prompt="Review the auth module for session handling bugs",
    ),
    "PreToolUse": event("PreToolUse", tool_name="Bash", tool_input=BASH, tool_use_id="toolu_01Bash"),
    "PermissionRequest": event(
        "PermissionRequest",
        tool_name="Bash",
        tool_input=BASH,
        permission_suggestions=[
            {
                "type": "addRules",
                "rules": [{"toolName": "Bash", "ruleContent": "pytest:*"}],
                "behavior": "allow",
                "destination": "localSettings",
            }
        ],
    ),
    "PostToolUse": event(
        "PostToolUse",
        tool_name="Bash",
        tool_input=BASH,
        tool_response={"stdout": "3 passed in 0.41s", "stderr": "", "interrupted": False, "isImage": False},
        tool_use_id="toolu_01Bash",
        duration_ms=412,
    ),
    "PostToolUseFailure": event(
        "PostToolUseFailure",
        tool_name="Read",
        tool_input={"file_path": f"{CWD}/auth/missing.py"},
        tool_use_id="toolu_02Read",
        error="File does not exist.",
        is_interrupt=False,
        duration_ms=3,
    ),
    "PermissionDenied": event(
        "PermissionDenied",
        tool_name="Bash",
        tool_input={"command": "rm -rf build/"},
        tool_use_id="toolu_03Rm",
        reason="auto mode: deleting files needs a person's approval",
    ),
    "PostToolBatch": event(
        "PostToolBatch",
        tool_calls=[
            {"tool_name": "Bash", "tool_input": BASH, "tool_use_id": "toolu_01Bash", "tool_response": "3 passed"},
            {"tool_name": "Read", "tool_input": {"file_path": "auth/missing.py"}, "tool_use_id": "toolu_02Read"},
        ],
    ),
    "PreSkillShellCommand": event(
        "PreSkillShellCommand",
        tool_name="Bash",
        tool_input={"command": "git log --oneline -5"},
        tool_use_id="toolu_04Skill",
        command_name="changelog",
        command_source="project",
        invoked_by="claude",
    ),
    "SubagentStart": event("SubagentStart", **SUBAGENT),
    "SubagentStop": event(
        "SubagentStop",
        stop_hook_active=False,
        agent_transcript_path=f"/home/dev/.claude/projects/-home-dev-projects-webapp/{SID}/subagents/agent-{AGENT_ID}.jsonl",
        last_assistant_message="The cookie is renewed in auth/session.py:renew() only on login.",
        **SUBAGENT,
    ),
    "Notification": event(
        "Notification", message="Claude needs your permission to use Bash", notification_type="permission_prompt"
    ),
    "Elicitation": event(
        "Elicitation",
        mcp_server_name="github",
        message="Which repository should the issue go to?",
        mode="form",
        elicitation_id="elic-1",
        requested_schema={"type": "object", "properties": {"repo": {"type": "string"}}},
    ),
    "ElicitationResult": event(
        "ElicitationResult",
        mcp_server_name="github",
        elicitation_id="elic-1",
        mode="form",
        action="accept",
        content={"repo": "dev/webapp"},
    ),  # fmt: skip
    "MessageDisplay": event("MessageDisplay", turn_id="turn-1", message_id="msg-1", index=0, final=True, delta="Done."),
    "Stop": event("Stop", stop_hook_active=False, last_assistant_message="Found it.", background_tasks=[]),
    "StopFailure": event(
        "StopFailure",
        error="rate_limit",
        error_details="429 rate_limit_error: This request would exceed the rate limit",
        last_assistant_message="",
    ),
    "PreCompact": event("PreCompact", trigger="auto", custom_instructions=None),
    "PostCompact": event("PostCompact", trigger="auto", compact_summary=SUMMARY),
    "PreModelSwitch": event("PreModelSwitch", source="command", **MODEL_SWITCH),
    "PostModelSwitch": event("PostModelSwitch", source="command", **MODEL_SWITCH),
    "ConfigChange": event("ConfigChange", source="project_settings", file_path=f"{CWD}/.claude/settings.json"),
    "CwdChanged": event("CwdChanged", old_cwd=CWD, new_cwd=f"{CWD}/auth"),
    "FileChanged": event("FileChanged", file_path=f"{CWD}/auth/session.py", event="change"),
    "DirectoryAdded": event("DirectoryAdded", directory="/home/dev/projects/shared-lib", source="slash_command"),
    "WorktreeCreate": event("WorktreeCreate", name="fix-login"),
    "WorktreeRemove": event("WorktreeRemove", worktree_path=f"{CWD}/.claude/worktrees/fix-login"),
    "TeammateIdle": event("TeammateIdle", teammate_name="tester", team_name="login-fix"),
    "TaskCreated": event(
        "TaskCreated",
        task_id="3",
        task_subject="Renew the cookie on refresh",
        task_description="auth/session.py",
        teammate_name="tester",
        team_name="login-fix",
    ),
    "TaskCompleted": event(
        "TaskCompleted",
        task_id="3",
        task_subject="Renew the cookie on refresh",
        teammate_name="tester",
        team_name="login-fix",
    ),  # fmt: skip
    "SessionEnd": event("SessionEnd", reason="prompt_input_exit"),
}
# A future Claude Code's event: stored, capped and redacted, never dropped.
UNKNOWN = event("PreTeleport", destination="mars", api_key="sk-ant-api03-" + "x" * 40, notes="n" * 30_000)


def one_session() -> list[dict]:
    """Every event at least once, in an order a real session could have them; the subagent's tool
    calls interleave with the main agent's."""
    f = FIXTURES
    sub_grep = {"tool_name": "Grep", "tool_input": {"pattern": "renew"}, "tool_use_id": "toolu_S1Grep", **SUBAGENT}
    main_read = {
        "tool_name": "Read",
        "tool_input": {"file_path": f"{CWD}/auth/session.py"},
        "tool_use_id": "toolu_05Read",
    }
    task = {
        "tool_name": "Task",
        "tool_input": {"subagent_type": "Explore", "prompt": "find renew"},
        "tool_use_id": "toolu_06Task",
    }
    return [
        f["Setup"], f["SessionStart"], f["InstructionsLoaded"], f["UserPromptSubmit"], f["UserPromptExpansion"],
        f["PreToolUse"], f["PermissionRequest"], f["PostToolUse"],
        event("PreToolUse", **{k: f["PostToolUseFailure"][k] for k in ("tool_name", "tool_input", "tool_use_id")}),
        f["PostToolUseFailure"],
        event("PreToolUse", **{k: f["PermissionDenied"][k] for k in ("tool_name", "tool_input", "tool_use_id")}),
        f["PermissionDenied"], f["PostToolBatch"], f["PreSkillShellCommand"],
        event("PreToolUse", **task), f["SubagentStart"],
        event("PreToolUse", **sub_grep),
        event("PreToolUse", **main_read),
        event("PostToolUse", **sub_grep, tool_response={"mode": "files_with_matches", "filenames": ["auth/session.py"]}),
        event("PostToolUse", **main_read, tool_response={"type": "text", "file": {"numLines": 120}}),
        f["SubagentStop"],
        event("PostToolUse", **task, tool_response={"content": [{"type": "text", "text": "renew() in session.py"}]}),
        f["Notification"], f["Elicitation"], f["ElicitationResult"],
        f["MessageDisplay"] | {"final": False, "index": 0}, f["MessageDisplay"] | {"index": 1},
        f["Stop"], f["UserPromptSubmit"] | {"prompt": "Fix it"}, f["StopFailure"],
        f["PreCompact"], f["PostCompact"], f["SessionStart"] | {"source": "compact"},
        f["PreModelSwitch"], f["PostModelSwitch"], f["ConfigChange"], f["CwdChanged"], f["FileChanged"],
        f["DirectoryAdded"], f["WorktreeCreate"], f["WorktreeRemove"], f["TeammateIdle"], f["TaskCreated"],
        f["TaskCompleted"], UNKNOWN, f["SessionEnd"],
    ]  # fmt: skip
