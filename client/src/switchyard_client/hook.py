"""`switchyard hook`: record one Claude Code hook payload (read from stdin) in Switchyard.

It must never block or break the agent: it finishes within ``SWITCHYARD_HOOK_BUDGET`` seconds
(0.8 by default), always exits 0, says what went wrong on stderr in one line, and keeps what it
could not send in the spool (``spool.py``), which the next call sends first, in order.

Claude Code events become API requests:
  SessionStart      open (or re-attach to) the session whose id is Claude Code's session_id, running
  UserPromptSubmit  back to running if the last turn ended, and a ``log`` event with the prompt
  PreToolUse        a running tool call whose client id is the tool_use_id (full input: the server
                    keeps its sha256 and a redacted summary)
  PostToolUse       finish that call by its client id (or record it finished, if the start never
                    arrived); a Write/Edit of a file inside the session's workspace uploads it,
                    linked to the call
  Notification      an ``input_request`` event
  Stop              waiting_for_input: Claude Code fires Stop after every answer, not at the end
  SessionEnd        completed
Anything else becomes a ``log`` event naming the hook.

Inside a run started by `switchyard runner` (SWITCHYARD_RUN set) everything goes to the run's session
(SWITCHYARD_SESSION) instead of one named after Claude Code's session id, and the session's status is
left to the runner: SessionStart, Stop and SessionEnd become ``log`` events.

Only the standard library is imported here (see wire.py: the budget is tens of milliseconds).
"""

from __future__ import annotations

import json
import os
import sys
import time
from urllib.parse import quote

from switchyard_client import wire
from switchyard_client.spool import Record, Spool, SpoolBusy, state_dir

DEFAULT_BUDGET = 0.8
PROMPT_MAX_CHARS = 4000
OUTPUT_MAX_CHARS = 64_000  # the server keeps a 2,000-character summary; no need to ship megabytes
UPLOAD_MAX_BYTES = 8 * 1024 * 1024  # bigger files are left to the observer
FILE_TOOLS = {"Write", "Edit", "MultiEdit", "NotebookEdit"}
RETRY_LATER = {429, 500, 502, 503, 504}


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
    workspace folder, the status we last asked for."""

    def __init__(self, session_id: str):
        self.path = os.path.join(state_dir(), "hook-sessions", f"{_seg(session_id)}.json")
        try:
            with open(self.path, encoding="utf-8") as fh:
                self.data: dict = json.load(fh)
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
                json.dump(self.data, fh)
            os.replace(tmp, self.path)
            self.dirty = False


# --- payload → requests ---------------------------------------------------------------------------------
def plan(payload: dict, memory: SessionMemory) -> list[Record]:
    """The requests one hook payload turns into, in the order they must be sent."""
    sid = str(payload.get("session_id") or "")
    event = str(payload.get("hook_event_name") or "")
    if not sid:
        raise ValueError("payload has no session_id")
    if os.environ.get("SWITCHYARD_RUN") and os.environ.get("SWITCHYARD_SESSION"):
        # Started by `switchyard runner`: the run's session is open already, its key may act on that
        # session only, and the runner reports how it ends. So: that session, and no lifecycle moves.
        sid = os.environ["SWITCHYARD_SESSION"]
        memory.set(open="done", status="running")
        if event in ("SessionStart", "Stop", "SessionEnd"):
            return [_event(f"sessions/{_seg(sid)}/", "log", {"hook": event})]
    base = f"sessions/{_seg(sid)}/"
    records: list[Record] = []
    if event == "SessionStart" or not memory.get("open"):
        records.append(_open_session(sid, payload))
        memory.set(open="queued")
    if event == "SessionStart":
        if payload.get("source") not in (None, "startup"):
            # resume / clear / compact: the session may be waiting after its last turn.
            records.append(_transition(sid, "running", f"Claude Code session {payload['source']}"))
        memory.set(status="running")
    elif event == "UserPromptSubmit":
        if memory.get("status") != "running":
            records.append(_transition(sid, "running", "prompt submitted"))
            memory.set(status="running")
        prompt = str(payload.get("prompt") or "")
        records.append(_event(base, "log", {"hook": event, "prompt": prompt[:PROMPT_MAX_CHARS]}))
    elif event == "PreToolUse":
        records.append(_post(base + "tool-calls/", _tool_start(payload)))
    elif event in ("PostToolUse", "PostToolUseFailure"):
        records.append(_tool_finish(base, payload, failed=event == "PostToolUseFailure"))
        upload = _artifact_upload(base, payload, memory)
        if upload:
            records.append(upload)
    elif event == "Notification":
        body = {"hook": event, "message": str(payload.get("message") or "")[:PROMPT_MAX_CHARS]}
        if payload.get("notification_type"):
            body["notification_type"] = payload["notification_type"]
        records.append(_event(base, "input_request", body))
    elif event == "Stop":
        records.append(_transition(sid, "waiting_for_input", "Claude Code finished its turn"))
        memory.set(status="waiting_for_input")
    elif event == "SessionEnd":
        records.append(_transition(sid, "completed", f"Claude Code session ended: {payload.get('reason') or 'other'}"))
        memory.set(status="completed")
    else:
        records.append(_event(base, "log", {"hook": event or "unknown"}))
    return records


def _post(path: str, body: dict, **extra: object) -> Record:
    return {"method": "POST", "path": path, "body": body, **extra}


def _open_session(sid: str, payload: dict) -> Record:
    cwd = str(payload.get("cwd") or "")
    body = {
        "id": sid,
        "intent": os.environ.get("SWITCHYARD_INTENT") or f"Claude Code session in {cwd or 'an unknown folder'}",
        "status": "running",
        "metadata": {
            "client": "claude-code",
            "cwd": cwd,
            "transcript_path": str(payload.get("transcript_path") or ""),
        },
    }
    return _post("sessions/", body, remember="open")


def _transition(sid: str, status: str, reason: str) -> Record:
    return _post(f"sessions/{_seg(sid)}/transition/", {"status": status, "reason": reason})


def _event(base: str, type: str, payload: dict) -> Record:
    return _post(base + "events/", {"id": _new_id(), "type": type, "payload": payload, "timestamp": _now()})


def _tool_id(payload: dict) -> str:
    return str(payload.get("tool_use_id") or "") or _new_id()


def _tool_start(payload: dict) -> dict:
    return {
        "id": _tool_id(payload),
        "tool_name": str(payload.get("tool_name") or "unknown"),
        "input": payload.get("tool_input"),
        "started_at": _now(),
    }


def _capped(value: object) -> object:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return value if len(text) <= OUTPUT_MAX_CHARS else text[:OUTPUT_MAX_CHARS] + f"... [{len(text)} chars]"


def _failed(response: object) -> bool:
    if isinstance(response, dict):
        return response.get("success") is False or bool(response.get("is_error")) or bool(response.get("interrupted"))
    return False


def _tool_finish(base: str, payload: dict, *, failed: bool) -> Record:
    response = payload.get("tool_response")
    failed = failed or _failed(response)
    finish: dict = {"status": "failure" if failed else "success", "finished_at": _now()}
    if response is not None:
        finish["output"] = _capped(response)
    if failed and payload.get("error"):
        finish["error"] = str(payload["error"])[:PROMPT_MAX_CHARS]
    tool_id = _tool_id(payload)
    # The start may never have reached Switchyard (hooks turned on mid-session): then record the
    # call finished, under the same client id.
    whole = {**_tool_start(payload), "id": tool_id, **finish}
    return {
        "method": "PATCH",
        "path": f"{base}tool-calls/{_seg(tool_id)}/",
        "body": finish,
        "on_404": _post(base + "tool-calls/", whole),
    }


def _artifact_upload(base: str, payload: dict, memory: SessionMemory) -> Record | None:
    if payload.get("tool_name") not in FILE_TOOLS:
        return None
    tool_input = payload.get("tool_input") or {}
    raw = tool_input.get("file_path") or tool_input.get("notebook_path") if isinstance(tool_input, dict) else None
    root = memory.get("workspace")
    if not raw or not root:
        return None
    target = os.path.realpath(os.path.join(str(payload.get("cwd") or "."), str(raw)))
    relative = os.path.relpath(target, os.path.realpath(str(root)))
    if relative == "." or relative.startswith(".."):
        return None  # outside the session's workspace: not an artifact of it
    params = {"tool_use_id": _tool_id(payload)}
    return {"method": "PUT", "path": f"{base}files/{quote(relative, safe='/')}", "file": target, "params": params}


# --- sending --------------------------------------------------------------------------------------------
class Sender:
    def __init__(self, url: str, key: str, deadline: float):
        base = url.rstrip("/")
        self.base = base if base.endswith("/api/v1") else base + "/api/v1"
        self.headers = {"Authorization": f"Bearer {key}", "User-Agent": "switchyard-hook/0.1"}
        self.deadline = deadline
        self.problems: list[str] = []

    def send_all(self, records: list[Record]) -> list[Record]:
        """Send in order; return what must wait for the next call (the first that could not be sent, and
        everything after it). Refusals that a retry cannot fix (4xx) are reported and dropped."""
        for index, record in enumerate(records):
            if time.monotonic() >= self.deadline:
                return records[index:]
            try:
                status, body = self._send(record)
                if status == 404 and record.get("on_404"):
                    status, body = self._send(record["on_404"])
            except wire.WireError as exc:
                self.problems.append(f"Switchyard unreachable ({exc}); {len(records) - index} request(s) spooled")
                return records[index:]
            if status in RETRY_LATER:
                self.problems.append(f"Switchyard answered {status}; {len(records) - index} request(s) spooled")
                return records[index:]
            if status >= 400:
                message = body.get("message") if isinstance(body, dict) else body
                self.problems.append(f"{record['method']} {record['path']} refused ({status}): {message}")
            elif record.get("remember") == "open" and isinstance(body, dict):
                self._remember_open(body)
        return []

    def _send(self, record: Record) -> tuple[int, object]:
        url = f"{self.base}/{record['path']}"
        if record.get("params"):
            url += "?" + "&".join(f"{k}={quote(str(v), safe='')}" for k, v in record["params"].items())
        headers = dict(self.headers)
        if "file" in record:
            try:
                if os.path.getsize(record["file"]) > UPLOAD_MAX_BYTES:
                    return 200, None  # left to the observer
                with open(record["file"], "rb") as fh:
                    body = fh.read()
            except OSError:
                return 200, None  # gone since: nothing to link
            headers["Content-Type"] = "application/octet-stream"
        else:
            body = json.dumps(record["body"], separators=(",", ":"), ensure_ascii=False).encode()
            headers["Content-Type"] = "application/json"
        return wire.request(record["method"], url, headers=headers, body=body, deadline=self.deadline)

    @staticmethod
    def _remember_open(session: dict) -> None:
        memory = SessionMemory(str(session.get("id")))
        workspace = session.get("workspace") or {}
        memory.set(open="done", workspace=workspace.get("path"))
        memory.save()


# --- entry point ----------------------------------------------------------------------------------------
def run(stdin: object = None, *, budget: float | None = None) -> int:
    started = time.monotonic()
    budget = budget if budget is not None else float(os.environ.get("SWITCHYARD_HOOK_BUDGET") or DEFAULT_BUDGET)
    deadline = started + budget
    try:
        payload = json.load(stdin or sys.stdin)
        if not isinstance(payload, dict):
            raise ValueError("the hook payload is not a JSON object")
        url, key = os.environ.get("SWITCHYARD_URL", ""), os.environ.get("SWITCHYARD_KEY", "")
        if not url or not key:
            _say("SWITCHYARD_URL and SWITCHYARD_KEY must be set; nothing recorded")
            return 0
        memory = SessionMemory(str(payload.get("session_id") or ""))
        records = plan(payload, memory)
        memory.save()
        _deliver(records, Sender(url, key, deadline), Spool(), lock_until=started + budget * 0.6)
    except Exception as exc:  # never break the agent: say it and go
        _say(f"{type(exc).__name__}: {exc}")
    return 0


def _deliver(records: list[Record], sender: Sender, spool: Spool, *, lock_until: float) -> None:
    try:
        with spool.locked(until=lock_until):
            queue = spool.read() + records
            spool.replace(sender.send_all(queue))
    except SpoolBusy:
        spool.overflow(records)
        sender.problems.append("spool busy (another hook is sending); kept for the next call")
    for problem in sender.problems:
        _say(problem)


def _say(message: str) -> None:
    print(f"switchyard hook: {message}", file=sys.stderr)
