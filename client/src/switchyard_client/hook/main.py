"""`switchyard hook`: record one Claude Code hook payload (read from stdin) in Switchyard.

It must never block or break the agent: it finishes within ``SWITCHYARD_HOOK_BUDGET`` seconds
(0.8 by default), always exits 0, says what went wrong on stderr in one line, and keeps what it
could not send in the spool (``spool.py``), which the next call sends first, in order.

What each Claude Code hook event becomes (session open, tool calls by tool_use_id, status moves,
events, milestones, file uploads; subagents in child sessions) is plan.py's ``plan``; the
README's "Claude Code hook events" table lists all of them. This module sends what it plans.

Inside a run started by `switchyard runner` (SWITCHYARD_RUN set) everything goes to the run's session
(SWITCHYARD_SESSION) instead of one named after Claude Code's session id, and the session's status is
left to the runner: SessionStart, Stop and SessionEnd become ``log`` events. There (SWITCHYARD_DEFER=1)
a PreToolUse that needs a person is deferred instead of waited on (defer.py): the agent exits, and the
answer resumes it.

Only the standard library is imported here, and not all of it: no ``json``, ``socket`` or
``urllib`` (see wire.py and lean_json.py: the budget is tens of milliseconds).
"""

from __future__ import annotations

import os
import sys
import time

from switchyard_client.hook import defer, wire
from switchyard_client.hook.lean_json import dumps, loads
from switchyard_client.hook.plan import SessionMemory, plan
from switchyard_client.hook.spool import Record, Spool, SpoolBusy

__all__ = ["SessionMemory", "plan", "run"]

DEFAULT_BUDGET = 0.8
UPLOAD_MAX_BYTES = 8 * 1024 * 1024  # bigger files are left to the observer
RETRY_LATER = {429, 500, 502, 503, 504}


# --- sending --------------------------------------------------------------------------------------------
class Sender:
    def __init__(self, url: str, key: str, deadline: float):
        base = url.rstrip("/")
        self.base = base if base.endswith("/api/v1") else base + "/api/v1"
        self.headers = {"Authorization": f"Bearer {key}", "User-Agent": "switchyard-hook/0.1"}
        self.deadline = deadline
        self.problems: list[str] = []
        self.answers: dict[int, dict] = {}  # id(record) → the server's answer, for records that await a verdict

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
            if status >= 400 and status not in record.get("ok_statuses", ()):
                message = body.get("message") if isinstance(body, dict) else body
                self.problems.append(f"{record['method']} {record['path']} refused ({status}): {message}")
            elif record.get("remember") == "open" and isinstance(body, dict):
                self._remember_open(body)
            elif record.get("await_verdict") and isinstance(body, dict):
                self.answers[id(record)] = body
        return []

    def _send(self, record: Record) -> tuple[int, object]:
        url = f"{self.base}/{record['path']}"
        if record.get("params"):
            url += "?" + "&".join(f"{k}={wire.quote(str(v), safe='')}" for k, v in record["params"].items())
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
            body = dumps(record["body"], separators=(",", ":"), ensure_ascii=False).encode()
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
        payload = loads((stdin or sys.stdin).read())
        if not isinstance(payload, dict):
            raise ValueError("the hook payload is not a JSON object")
        url, key = os.environ.get("SWITCHYARD_URL", ""), os.environ.get("SWITCHYARD_KEY", "")
        if not url or not key:
            _say("SWITCHYARD_URL and SWITCHYARD_KEY must be set; nothing recorded")
            return 0
        memory = SessionMemory(str(payload.get("session_id") or ""))
        records = plan(payload, memory)
        memory.save()
        deferring = defer.enabled() and payload.get("hook_event_name") == "PreToolUse" and not payload.get("agent_id")
        answer = defer.decided(payload) if deferring else None
        decision = defer.decided_output(answer) if answer is not None else None
        call = next((r for r in records if r.get("await_verdict")), None)
        if decision is not None:
            # Recorded when it was deferred: sent again, the policy or the budget would ask again.
            records = [r for r in records if r is not call]
        sender = Sender(url, key, deadline)
        left = _deliver(records, sender, Spool(), lock_until=started + budget * 0.6)
        if decision is not None:
            _decided(decision, call=call, sender=sender)
            return 0
        asked = next((r for r in records if r.get("await_answer")), None)
        if asked is not None:
            _permission(asked, sent=not any(r is asked for r in left), sender=sender, started=started, memory=memory)
        # The tool policy's verdict, or an exceeded budget's (usage/budgets.py): answered alike.
        verdict = next(
            (
                sender.answers[id(r)].get("policy") or sender.answers[id(r)].get("budget")
                for r in records
                if id(r) in sender.answers
            ),
            None,
        )
        if isinstance(verdict, dict) and deferring and _defers(verdict):
            defer.print_defer(str(verdict.get("question") or verdict.get("reason") or "a question"))
        elif isinstance(verdict, dict):
            _policy(verdict, asked=next(r for r in records if id(r) in sender.answers), sender=sender, started=started)
        elif deferring and call is not None and not any(r is call for r in left) and defer.would_ask(payload):
            _ask_and_defer(payload, memory=memory, sender=sender)
    except Exception as exc:  # never break the agent: say it and go
        _say(f"{type(exc).__name__}: {exc}")
    return 0


def _deliver(records: list[Record], sender: Sender, spool: Spool, *, lock_until: float) -> list[Record]:
    """Send what is spooled and then ``records``; what could not be sent (spooled) is returned."""
    left = records
    try:
        with spool.locked(until=lock_until):
            queue = spool.read() + records
            left = sender.send_all(queue)
            spool.replace(left)
    except SpoolBusy:
        spool.overflow(records)
        sender.problems.append("spool busy (another hook is sending); kept for the next call")
    for problem in sender.problems:
        _say(problem)
    sender.problems.clear()
    return left


def _permission(asked: Record, *, sent: bool, sender: Sender, started: float, memory: SessionMemory) -> None:
    """A PermissionRequest or an Elicitation: wait for a person's answer and print Claude Code's
    decision (answer.py)."""
    from switchyard_client.hook import answer as hook_answer  # here: no other event needs it

    timeout = hook_answer.permission_timeout()
    if not timeout:
        return
    where = asked["await_answer"]
    elicitation = where.get("kind") == "elicitation"
    if sent:
        answer = hook_answer.answer_elicitation if elicitation else hook_answer.answer_permission
        # A permission's answer may apply one of the suggestions the hook recorded (answer.py).
        extra = {} if elicitation else {"suggestions": asked["body"]["payload"].get("permission_suggestions")}
        output = answer(
            sender,
            session_id=where["session"],
            request_id=asked["body"]["id"],
            until=started + timeout,
            timeout=timeout,
            **extra,
        )
        # Answered or given up, the session runs again: the next event need not move it.
        if where["agent_id"]:
            memory.set(subagents={**(memory.get("subagents") or {}), where["agent_id"]: "running"})
        else:
            memory.set(status="running", waiting="")
        memory.save()
    else:
        # Spooled (Switchyard unreachable): nobody can answer it; the default applies at once, and the
        # session's wait is ended by the next event, as without an answer (plan.py's resume_from).
        sender.problems.append("the question is spooled, not recorded: the default answer applies")
        output = hook_answer.elicitation_default_output() if elicitation else hook_answer.default_output(timeout)
    hook_answer.print_output(output)
    for problem in sender.problems:
        _say(problem)


def _defers(verdict: dict) -> bool:
    """A verdict a person answers (the policy's ask, an exceeded budget), with its question recorded."""
    return (verdict.get("decision") == "ask" or bool(verdict.get("exceeded"))) and bool(verdict.get("request_id"))


def _ask_and_defer(payload: dict, *, memory: SessionMemory, sender: Sender) -> None:
    """Claude Code would ask permission for this call (defer.would_ask): record the question as a
    PermissionRequest of this call would be, then defer. Not recorded (Switchyard unreachable): no
    decision, so Claude Code asks its PermissionRequest hook, which waits as in a hand-started session."""
    asked = plan({**payload, "hook_event_name": "PermissionRequest"}, memory)
    memory.save()
    sender.deadline = time.monotonic() + 3  # the budget went to recording the call
    left = _deliver(asked, sender, Spool(), lock_until=time.monotonic() + 1)
    if any(r.get("await_answer") for r in left):
        _say("the permission question is spooled, not recorded: not deferred")
        return
    defer.print_defer(f"Allow {payload.get('tool_name') or 'a tool'}?")


def _decided(decision: tuple[str, str], *, call: Record | None, sender: Sender) -> None:
    """The resumed run's deferred call: the person's decision, as Claude Code's permissionDecision."""
    from switchyard_client.hook import answer as hook_answer

    verdict, reason = decision
    hook_answer.print_output(hook_answer.pre_tool_output(verdict, reason))
    if verdict == "deny" and call is not None:
        # Claude Code sends no PostToolUse for a call its hook denied: the call ends here.
        path = f"{call['path']}{wire.quote(str(call['body']['id']), safe='')}/"
        finish = {"status": "failure", "error": reason}
        sender.deadline = time.monotonic() + 3
        sender.send_all([{"method": "PATCH", "path": path, "body": finish, "ok_statuses": [409]}])
    for problem in sender.problems:
        _say(problem)


def _policy(verdict: dict, *, asked: Record, sender: Sender, started: float) -> None:
    """A PreToolUse the server's tool policy marks: deny at once, or wait for a person's Allow / Deny
    (sessions_app/tool_policy.py); prints Claude Code's permissionDecision."""
    from switchyard_client.hook import answer as hook_answer

    where = asked["await_verdict"]
    output = hook_answer.answer_tool_policy(
        sender, verdict=verdict, session_id=where["session"], started=started, timeout=hook_answer.permission_timeout()
    )
    hook_answer.print_output(output)
    decided = (output or {}).get("hookSpecificOutput", {})
    if decided.get("permissionDecision") == "deny":
        # Claude Code sends no PostToolUse for a call its hook denied: the call ends here.
        finish = {"status": "failure", "error": decided.get("permissionDecisionReason", "denied")}
        path = f"{asked['path']}{wire.quote(str(asked['body']['id']), safe='')}/"
        sender.deadline = time.monotonic() + 3  # the budget went to the wait
        sender.send_all([{"method": "PATCH", "path": path, "body": finish, "ok_statuses": [409]}])
    for problem in sender.problems:
        _say(problem)


def _say(message: str) -> None:
    print(f"switchyard hook: {message}", file=sys.stderr)
