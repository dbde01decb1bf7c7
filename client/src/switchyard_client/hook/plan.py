# Over 400 lines: EVENTS and its handlers are one table (the README's); split, every hook call would read one more module.
"""What one Claude Code hook payload becomes: the API requests `switchyard hook` sends, in order.

Written against the hook events of ``@anthropic-ai/claude-agent-sdk`` 0.3.332 (``HOOK_EVENTS`` and
the ``*HookInput`` types of its sdk.d.ts, the SDK of Claude Code 2.1.332): 34 events. The README's
"Claude Code hook events" table says what each becomes; ``EVENTS`` below is that table in code.
An event not in it (a newer Claude Code) is stored as a ``log`` event with its payload, capped (the
server redacts secrets from every event payload), never dropped and never an error.

Subagents: a payload with ``agent_id`` comes from a subagent (the Task tool's agents, teammates),
and everything it carries goes to a child session of the main one, opened on first sight with the
main session as its parent; so tool calls land in the subagent that made them however interleaved.

Only the standard library is imported here, and not all of it (see wire.py and lean_json.py: the
budget is tens of milliseconds).
"""

from __future__ import annotations

import os
import time

from switchyard_client.hook.lean_json import dumps, loads
from switchyard_client.hook.spool import Record, state_dir
from switchyard_client.hook.wire import quote

PROMPT_MAX_CHARS = 4000
OUTPUT_MAX_CHARS = 64_000  # the server keeps a 2,000-character summary; no need to ship megabytes
RAW_MAX_CHARS = 16_000  # an unknown event's payload, as JSON
MILESTONE_MAX_CHARS = 10_000  # the milestone API's limit
FILE_TOOLS = {"Write", "Edit", "MultiEdit", "NotebookEdit"}
SESSION_ID_MAX = 128
ID_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-")  # the server's id rule
ASKED_KEPT = 20  # permission requests remembered until their call resolves
# What every hook payload carries (BaseHookInput); an unknown event's payload is stored without it.
BASE_FIELDS = {"session_id", "transcript_path", "cwd", "hook_event_name", "prompt_id", "permission_mode", "effort"}


def _now() -> str:
    # time, not datetime: every import counts in a process that lives for milliseconds.
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1_000_000):06d}+00:00"


def _seg(value: str) -> str:
    return quote(value, safe="")


def _new_id() -> str:
    return os.urandom(16).hex()


# --- per-session memory between hook processes ---------------------------------------------------------
class SessionMemory:
    """What one hook process tells the next about a session: that its open is queued or done, the
    workspace folder, the status we last asked for (and why it waits), the subagents opened, and
    the MessageDisplay counters not yet reported."""

    def __init__(self, session_id: str):
        self.path = os.path.join(state_dir(), "hook-sessions", f"{_seg(session_id)}.json")
        try:
            with open(self.path, encoding="utf-8") as fh:
                self.data: dict = loads(fh.read())
        except (OSError, ValueError):
            self.data = {}
        self.dirty = False

    def get(self, name: str, default: object = None) -> object:
        return self.data.get(name, default)

    def set(self, **values: object) -> None:
        if any(self.data.get(k) != v for k, v in values.items()):
            self.data.update(values)
            self.dirty = True

    def save(self) -> None:
        if self.dirty:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            tmp = f"{self.path}.{os.getpid()}.tmp"
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write(dumps(self.data))
            os.replace(tmp, self.path)
            self.dirty = False


def subagent_session_id(main: str, agent_id: str) -> str:
    """The child session of a subagent: ``<main>:<agent_id>``, within the server's id rules
    (1-128 of letters, digits, '.', '_', ':', '-'); too long or odd ids are hashed."""
    safe = "".join(c if c in ID_CHARS else "-" for c in agent_id)
    candidate = f"{main}:{safe}"
    if safe == agent_id and len(candidate) <= SESSION_ID_MAX:
        return candidate
    import hashlib  # here: most hook calls never need it

    digest = hashlib.sha256(agent_id.encode()).hexdigest()[:24]
    return f"{main[: SESSION_ID_MAX - 30]}:sub-{digest}"


# --- one payload → requests ------------------------------------------------------------------------------
class Plan:
    """The requests one payload turns into. ``sid``/``base`` are the session the event belongs to
    (a subagent's child session when the payload has ``agent_id``); ``main`` is Claude Code's session."""

    def __init__(self, payload: dict, memory: SessionMemory, *, main: str, runner: bool):
        self.payload, self.memory, self.main, self.runner = payload, memory, main, runner
        self.event = str(payload.get("hook_event_name") or "")
        self.records: list[Record] = []
        self.agent_id = str(payload.get("agent_id") or "")
        self.sid = subagent_session_id(main, self.agent_id) if self.agent_id else main
        self.base = f"sessions/{_seg(self.sid)}/"
        self.main_base = f"sessions/{_seg(main)}/"

    # building blocks
    def post(self, path: str, body: dict, **extra: object) -> None:
        self.records.append({"method": "POST", "path": path, "body": body, **extra})

    def emit(self, type: str, body: dict, *, base: str | None = None) -> None:
        self.post(
            (base or self.base) + "events/", {"id": _new_id(), "type": type, "payload": body, "timestamp": _now()}
        )

    def log(self, *fields: str, type: str = "log", **extra: object) -> None:
        """An event named after the hook with these documented fields of the payload (when present)."""
        body: dict = {"hook": self.event}
        for name in fields:
            if self.payload.get(name) is not None:
                body[name] = _small(self.payload[name])
        body.update(extra)
        self.emit(type, body)

    def status(self, status: str, reason: str, *, waiting: str = "", force: bool = False) -> None:
        """Move the event's session to ``status`` unless we know it is there. In a run started by
        `switchyard runner` the runner owns the main session's status: no move, but when ``force``d
        (a permission request waits for a person there too)."""
        if self.agent_id:
            children = dict(self.memory.get("subagents") or {})
            if children.get(self.agent_id) == status:
                return
            children[self.agent_id] = status
            self.memory.set(subagents=children)
        elif self.runner and not force:
            return
        else:
            if self.memory.get("status") == status:
                return
            self.memory.set(status=status, waiting=waiting)
        self.post(f"{self.base}transition/", {"status": status, "reason": reason})

    def resume_from(self, *kinds: str) -> None:
        """The agent acts again after a wait of one of these kinds (permission, elicitation, turn)."""
        if self.agent_id:
            if (self.memory.get("subagents") or {}).get(self.agent_id) == "waiting_for_input":
                self.status("running", f"Claude Code went on after {self.event}")
        elif self.memory.get("status") != "running" and self.memory.get("waiting", "turn") in kinds:
            self.status("running", f"Claude Code went on after {self.event}")

    def open_main(self) -> None:
        cwd = str(self.payload.get("cwd") or "")
        metadata = {
            "client": "claude-code",
            "cwd": cwd,
            "transcript_path": str(self.payload.get("transcript_path") or ""),
        }
        if self.event == "SessionStart":
            for name in ("model", "agent_type", "session_title"):
                if self.payload.get(name):
                    metadata[name] = str(self.payload[name])
        body = {
            "id": self.main,
            "intent": os.environ.get("SWITCHYARD_INTENT") or f"Claude Code session in {cwd or 'an unknown folder'}",
            "status": "running",
            "metadata": metadata,
        }
        self.post("sessions/", body, remember="open")
        self.memory.set(open="queued")

    def open_subagent(self) -> None:
        children = dict(self.memory.get("subagents") or {})
        if self.agent_id in children:
            return
        agent_type = str(self.payload.get("agent_type") or "subagent")
        body = {
            "id": self.sid,
            "parent": self.main,
            "intent": f"{agent_type} subagent of Claude Code session {self.main}",
            "status": "running",
            "labels": ["subagent"],
            "metadata": {
                "client": "claude-code",
                "cwd": str(self.payload.get("cwd") or ""),
                "agent_id": self.agent_id,
                "agent_type": agent_type,
            },
        }
        self.post("sessions/", body)
        children[self.agent_id] = "running"
        self.memory.set(subagents=children)

    def answered(self, call: dict) -> bool:
        """Forget the permission asked for this call; True if one was."""
        asked = list(self.memory.get("asked") or [])
        if not asked:
            return False  # the usual case, without hashing anything
        key = _asked_key(self.sid, call)
        if key not in asked:
            return False
        asked.remove(key)
        self.memory.set(asked=asked)
        return True

    def flush_display_counter(self) -> None:
        """MessageDisplay fires per streamed piece of text: counted in memory, reported here once."""
        counted = self.memory.get("displayed")
        if counted:
            self.emit("log", {"hook": "MessageDisplay", **counted}, base=self.main_base)
            self.memory.set(displayed=None)


def plan(payload: dict, memory: SessionMemory) -> list[Record]:
    """The requests one hook payload turns into, in the order they must be sent."""
    main = str(payload.get("session_id") or "")
    if not main:
        raise ValueError("payload has no session_id")
    runner = bool(os.environ.get("SWITCHYARD_RUN") and os.environ.get("SWITCHYARD_SESSION"))
    if runner:
        # Started by `switchyard runner`: the run's session is open already, its key may act on that
        # session and its children only, and the runner reports how the run ends.
        main = os.environ["SWITCHYARD_SESSION"]
        memory.set(open="done", status="running")
    p = Plan(payload, memory, main=main, runner=runner)
    if not runner and (p.event == "SessionStart" and not p.agent_id or not memory.get("open")):
        p.open_main()
    if p.agent_id and not (p.event == "SubagentStop" and p.agent_id not in (memory.get("subagents") or {})):
        # Every event of a subagent opens its session on first sight, but its end: Claude Code's own
        # helpers (the compaction's summarizer) stop without ever starting, and are no subagent of ours.
        p.open_subagent()
    if runner and not p.agent_id and p.event in ("SessionStart", "Stop", "SessionEnd"):
        if p.event != "SessionStart":
            p.flush_display_counter()
        p.log()
    else:
        EVENTS.get(p.event, _unknown)(p)
    return p.records


# --- the events -------------------------------------------------------------------------------------------
def _session_start(p: Plan) -> None:
    source = p.payload.get("source")
    if source not in (None, "startup"):
        # resume / clear / compact / fork: the session may be waiting after its last turn.
        p.memory.set(status=None)
        p.status("running", f"Claude Code session {source}")
    else:
        p.memory.set(status="running")


def _session_end(p: Plan) -> None:
    p.flush_display_counter()
    p.status("completed", f"Claude Code session ended: {p.payload.get('reason') or 'other'}")


def _prompt(p: Plan) -> None:
    p.resume_from("turn", "permission", "elicitation")
    if p.event == "UserPromptSubmit":
        prompt = str(p.payload.get("prompt") or "")
        extra = {"source": str(p.payload["source"])} if p.payload.get("source") not in (None, "user") else {}
        p.emit("log", {"hook": p.event, "prompt": prompt[:PROMPT_MAX_CHARS], **extra})
    else:
        p.log("expansion_type", "command_name", "command_args", "command_source", "prompt")


def _pre_tool(p: Plan) -> None:
    p.resume_from("permission", "elicitation")
    # The call's answer may carry the server's tool policy verdict (ask / deny): main.py acts on it.
    p.post(p.base + "tool-calls/", _tool_start(p.payload), await_verdict={"session": p.sid, "agent_id": p.agent_id})


def _post_tool(p: Plan) -> None:
    p.resume_from("permission", "elicitation")
    p.answered(p.payload)
    p.records.append(_tool_finish(p))
    upload = _artifact_upload(p)
    if upload:
        p.records.append(upload)


def _permission_request(p: Plan) -> None:
    tool = str(p.payload.get("tool_name") or "a tool")
    p.log(
        "tool_name",
        "tool_input",
        "mcp_server",
        "permission_suggestions",
        type="input_request",
        question=f"Allow {tool}?",
        choices=["allow", "deny"],
    )
    # main.py waits for a person's answer to this event (its id) once it is sent: answer.py.
    p.records[-1]["await_answer"] = {"session": p.sid, "agent_id": p.agent_id}
    # The last few only: a request whose call never resolves (PostToolBatch not hooked) must not pile up.
    p.memory.set(asked=[*(p.memory.get("asked") or []), _asked_key(p.sid, p.payload)][-ASKED_KEPT:])
    p.status("waiting_for_input", f"Claude Code asks permission to use {tool}", waiting="permission", force=True)


def _permission_denied(p: Plan) -> None:
    p.resume_from("permission")
    p.answered(p.payload)
    reason = str(p.payload.get("reason") or "denied")
    p.records.append(_tool_finish(p, error=f"permission denied: {reason}"))


def _post_tool_batch(p: Plan) -> None:
    calls = [c for c in p.payload.get("tool_calls") or [] if isinstance(c, dict)]
    ids = [str(c.get("tool_use_id")) for c in calls if c.get("tool_use_id")]
    p.emit("log", {"hook": p.event, "count": len(calls), "tool_use_ids": ids[:100]})
    for call in calls:
        # Asked for, and neither run nor denied: headless, or refused in the dialog (Claude Code sends
        # no PostToolUse then). The batch has resolved every call, so that one is over: not run.
        if p.answered(call):
            response = str(call.get("tool_response") or "no answer")
            finish = _tool_finish(p, error=f"permission not granted: {response}", call=call)
            p.records.append({**finish, "ok_statuses": [409]})  # 409: it was finished meanwhile


def _stop(p: Plan) -> None:
    p.flush_display_counter()
    p.status("waiting_for_input", "Claude Code finished its turn", waiting="turn")


def _stop_failure(p: Plan) -> None:
    p.flush_display_counter()
    p.log("error", "error_details", "last_assistant_message")
    error = str(p.payload.get("error") or "unknown")
    p.status("waiting_for_input", f"Claude Code's turn failed: {error}", waiting="turn")


def _message_display(p: Plan) -> None:
    counted = dict(p.memory.get("displayed") or {"messages": 0, "deltas": 0})
    counted["deltas"] = counted.get("deltas", 0) + 1
    counted["messages"] = counted.get("messages", 0) + bool(p.payload.get("final"))
    p.memory.set(displayed=counted)


def _subagent_start(p: Plan) -> None:
    p.emit("log", _subagent_body(p), base=p.main_base)


def _subagent_stop(p: Plan) -> None:
    if p.agent_id in (p.memory.get("subagents") or {}):
        p.status("completed", f"{p.payload.get('agent_type') or 'subagent'} subagent finished")
    body = _subagent_body(p)
    for name in ("agent_transcript_path", "last_assistant_message"):
        if p.payload.get(name):
            body[name] = str(p.payload[name])[:PROMPT_MAX_CHARS]
    p.emit("log", body, base=p.main_base)


def _subagent_body(p: Plan) -> dict:
    body = {"hook": p.event, "agent_id": p.agent_id, "agent_type": str(p.payload.get("agent_type") or "")}
    if p.agent_id in (p.memory.get("subagents") or {}):
        body["session"] = p.sid
    return body


def _post_compact(p: Plan) -> None:
    summary = str(p.payload.get("compact_summary") or "").strip()
    heading = f"Context compacted ({p.payload.get('trigger') or 'auto'})"
    text = f"{heading}: {summary}" if summary else heading
    if len(text) > MILESTONE_MAX_CHARS:
        cut = " [... cut]"
        text = text[: MILESTONE_MAX_CHARS - len(cut)] + cut
    p.post(p.base + "milestones/", {"id": _new_id(), "text": text})


def _notification(p: Plan) -> None:
    body = {"hook": p.event, "message": str(p.payload.get("message") or "")[:PROMPT_MAX_CHARS]}
    for name in ("notification_type", "title"):
        if p.payload.get(name):
            body[name] = str(p.payload[name])[:PROMPT_MAX_CHARS]
    p.emit("input_request", body)


def _elicitation(p: Plan) -> None:
    question = str(p.payload.get("message") or "")[:PROMPT_MAX_CHARS]
    p.log(
        "mcp_server_name",
        "mode",
        "url",
        "elicitation_id",
        "requested_schema",
        type="input_request",
        question=question,
        choices=["accept", "decline", "cancel"],
        field_order=_field_order(p.payload.get("requested_schema")),
    )
    # main.py waits for a person's answer (a form built from requested_schema): answer.py.
    p.records[-1]["await_answer"] = {"session": p.sid, "agent_id": p.agent_id, "kind": "elicitation"}
    server = p.payload.get("mcp_server_name") or "an MCP server"
    p.status("waiting_for_input", f"{server} asks for input", waiting="elicitation", force=True)


def _field_order(schema: object) -> list:
    """The requested fields in the MCP server's order (the server's jsonb storage sorts an object's keys)."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    return [str(name) for name in properties][:100] if isinstance(properties, dict) else []


def _elicitation_result(p: Plan) -> None:
    p.log("mcp_server_name", "elicitation_id", "mode", "action", "content")
    p.resume_from("elicitation")


def _task(p: Plan) -> None:
    state = "completed" if p.event == "TaskCompleted" else "created"
    fields = ("task_id", "task_subject", "task_description", "teammate_name", "team_name")
    p.log(*fields, type="plan_update", status=state)


def _asked_key(sid: str, call: dict) -> str:
    """A permission request and its tool call, matched by session, tool and input (the request has
    no tool_use_id); hashed, so no input (a command with a token in it) is kept in the state folder."""
    import hashlib  # here: most hook calls never need it

    raw = dumps([sid, call.get("tool_name"), call.get("tool_input")], sort_keys=True, default=str)
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


def _fields(*names: str):
    def record(p: Plan) -> None:
        p.log(*names)

    return record


def _unknown(p: Plan) -> None:
    raw = {k: v for k, v in p.payload.items() if k not in BASE_FIELDS}
    text = dumps(raw, ensure_ascii=False, default=str)
    body = {"hook": p.event or "unknown", "payload": raw if len(text) <= RAW_MAX_CHARS else text[:RAW_MAX_CHARS]}
    if len(text) > RAW_MAX_CHARS:
        body["truncated_from_chars"] = len(text)
    p.emit("log", body)


MODEL_SWITCH = ("from_model", "to_model", "requested_model", "source", "context_tokens", "estimated_cache_write_usd")
EVENTS = {
    # session
    "SessionStart": _session_start,
    "SessionEnd": _session_end,
    "Setup": _fields("trigger"),
    # prompts
    "UserPromptSubmit": _prompt,
    "UserPromptExpansion": _prompt,
    # tools
    "PreToolUse": _pre_tool,
    "PostToolUse": _post_tool,
    "PostToolUseFailure": _post_tool,
    "PostToolBatch": _post_tool_batch,
    "PermissionRequest": _permission_request,
    "PermissionDenied": _permission_denied,
    "PreSkillShellCommand": _fields(
        "command_name", "command_source", "invoked_by", "tool_name", "tool_input", "tool_use_id"
    ),
    # turns
    "Stop": _stop,
    "StopFailure": _stop_failure,
    "MessageDisplay": _message_display,
    # subagents
    "SubagentStart": _subagent_start,
    "SubagentStop": _subagent_stop,
    # compaction and model
    "PreCompact": _fields("trigger", "custom_instructions"),
    "PostCompact": _post_compact,
    "PreModelSwitch": _fields(*MODEL_SWITCH),
    "PostModelSwitch": _fields(*MODEL_SWITCH),
    # asking a person
    "Notification": _notification,
    "Elicitation": _elicitation,
    "ElicitationResult": _elicitation_result,
    # instructions, configuration, folders, files
    "InstructionsLoaded": _fields(
        "file_path", "memory_type", "load_reason", "globs", "trigger_file_path", "parent_file_path"
    ),
    "ConfigChange": _fields("source", "file_path"),
    "CwdChanged": _fields("old_cwd", "new_cwd"),
    "FileChanged": _fields("file_path", "event"),
    "DirectoryAdded": _fields("directory", "source"),
    "WorktreeCreate": _fields("name"),
    "WorktreeRemove": _fields("worktree_path"),
    # agent teams
    "TeammateIdle": _fields("teammate_name", "team_name"),
    "TaskCreated": _task,
    "TaskCompleted": _task,
}


# --- tool calls and files ---------------------------------------------------------------------------------
def _small(value: object) -> object:
    """A field as stored in an event: strings and JSON capped (the server caps the whole payload too)."""
    if isinstance(value, str):
        return value[:PROMPT_MAX_CHARS]
    if isinstance(value, (int, float, bool)):
        return value
    text = dumps(value, ensure_ascii=False, default=str)
    return value if len(text) <= PROMPT_MAX_CHARS else text[:PROMPT_MAX_CHARS] + f"... [{len(text)} chars]"


def _tool_id(payload: dict) -> str:
    return str(payload.get("tool_use_id") or "") or _new_id()


def _tool_start(payload: dict) -> dict:
    start = {
        "id": _tool_id(payload),
        "tool_name": str(payload.get("tool_name") or "unknown"),
        "input": payload.get("tool_input"),
        "started_at": _now(),
    }
    if payload.get("cwd"):  # the server's tool policy resolves a relative file path against it
        start["cwd"] = str(payload["cwd"])[:4096]
    return start


def _capped(value: object) -> object:
    text = dumps(value, ensure_ascii=False, default=str)
    return value if len(text) <= OUTPUT_MAX_CHARS else text[:OUTPUT_MAX_CHARS] + f"... [{len(text)} chars]"


def _failed(response: object) -> bool:
    if isinstance(response, dict):
        return response.get("success") is False or bool(response.get("is_error")) or bool(response.get("interrupted"))
    return False


def _tool_finish(p: Plan, *, error: str = "", call: dict | None = None) -> Record:
    payload = call or p.payload
    response = payload.get("tool_response")
    failed = bool(error) or p.event == "PostToolUseFailure" or _failed(response)
    finish: dict = {"status": "failure" if failed else "success", "finished_at": _now()}
    if response is not None:
        finish["output"] = _capped(response)
    error = error or str(payload.get("error") or "")
    if failed and error:
        if payload.get("is_interrupt"):
            error = f"interrupted: {error}"
        finish["error"] = error[:PROMPT_MAX_CHARS]
    tool_id = _tool_id(payload)
    # The start may never have reached Switchyard (hooks turned on mid-session): then record the
    # call finished, under the same client id.
    whole = {**_tool_start(payload), "id": tool_id, **finish}
    return {
        "method": "PATCH",
        "path": f"{p.base}tool-calls/{_seg(tool_id)}/",
        "body": finish,
        "on_404": {"method": "POST", "path": p.base + "tool-calls/", "body": whole},
    }


def _artifact_upload(p: Plan) -> Record | None:
    """A Write/Edit of a file inside the main session's workspace: upload it, linked to the call. A
    subagent writes in the same folder; its file goes to the main session, where it is on disk."""
    payload = p.payload
    if payload.get("tool_name") not in FILE_TOOLS:
        return None
    tool_input = payload.get("tool_input") or {}
    raw = tool_input.get("file_path") or tool_input.get("notebook_path") if isinstance(tool_input, dict) else None
    root = p.memory.get("workspace")
    if not raw or not root:
        return None
    target = os.path.realpath(os.path.join(str(payload.get("cwd") or "."), str(raw)))
    relative = os.path.relpath(target, os.path.realpath(str(root)))
    if relative == "." or relative.startswith(".."):
        return None  # outside the session's workspace: not an artifact of it
    record: Record = {"method": "PUT", "path": f"{p.main_base}files/{quote(relative, safe='/')}", "file": target}
    if not p.agent_id:
        record["params"] = {"tool_use_id": _tool_id(payload)}
    return record
