"""A permission request answered by a person: `switchyard hook` waits for the answer and prints
Claude Code's decision.

After the hook has recorded a ``PermissionRequest`` (an ``input_request`` event with choices allow /
deny, the session waiting for input), it long-polls
``GET /api/v1/sessions/{id}/input-requests/{event id}/?wait=N`` until a person answers on the session
page or the card, or ``SWITCHYARD_PERMISSION_TIMEOUT`` seconds (55 by default: below the 60 s Claude
Code gives a hook; the runner's settings give this hook 65) have passed since the hook started. Then
it prints, on stdout, the hook output Claude Code reads (sdk.d.ts ``PermissionRequestHookSpecificOutput``
of @anthropic-ai/claude-agent-sdk 0.3.332)::

    {"hookSpecificOutput": {"hookEventName": "PermissionRequest",
                            "decision": {"behavior": "allow"} | {"behavior": "deny", "message": "..."}}}

An allow the person gave with one of the request's ``permission_suggestions`` ("Always allow
Bash(npm test:*)"; the answer's ``suggestion`` is its index) carries that suggestion, as Claude Code
sent it to this hook, in ``decision.updatedPermissions``: Claude Code applies it (adds the rule to
the settings it names) as its own dialog's "Yes, and don't ask again" does.

Nobody answered in time: ``SWITCHYARD_PERMISSION_DEFAULT`` decides: ``deny`` (the default, with a
message saying so), ``allow``, or ``ask`` (no output: Claude Code asks in its own dialog); the
session is moved back to running, so nobody answers a question no longer asked.
``SWITCHYARD_PERMISSION_TIMEOUT=0`` turns the wait off: the hook records the request and prints nothing.

The same wait serves two more questions (the timeout is the same variable):

- an ``Elicitation`` (an MCP server asks the user for input; sessions_app/elicitations.py): the
  person fills in a form built from ``requested_schema`` and accepts, or declines or cancels; the
  hook prints ``{"hookSpecificOutput": {"hookEventName": "Elicitation", "action": "accept",
  "content": {...}}}`` (sdk.d.ts ``ElicitationHookSpecificOutput``, same SDK). Nobody answered:
  ``SWITCHYARD_ELICITATION_DEFAULT`` decides: ``cancel`` (the default), ``decline``, or ``ask``
  (no output: Claude Code shows its own dialog).
- a ``PreToolUse`` the server's tool policy marks (sessions_app/tool_policy.py): the recorded call's
  answer carries ``policy`` (``ask`` with the question's id, or ``deny``); the hook prints
  ``{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow" | "deny",
  "permissionDecisionReason": "..."}}``; nobody answered: ``SWITCHYARD_PERMISSION_DEFAULT``.

This wait is for sessions started by hand: their Claude Code process waits with the hook, up to the
timeout, and nothing could resume them for the person afterwards. In a run a runner started
(SWITCHYARD_DEFER=1) the hook defers a PreToolUse that needs a person instead (defer.py): the agent
exits, the question waits without a process, and the answer resumes the session however late; only a
PermissionRequest that Claude Code asks there anyway (a rule defer.py does not read), or a
subagent's question, waits here.

Only the standard library is imported here (see wire.py).
"""

from __future__ import annotations

import json
import os
import sys
import time

from switchyard_client.hook import wire

DEFAULT_TIMEOUT = 55.0
POLL_MAX_SECONDS = 25  # the server holds a poll at most this long
DEFAULTS = ("deny", "allow", "ask")
ELICITATION_DEFAULTS = ("cancel", "decline", "ask")
ELICITATION_ACTIONS = ("accept", "decline", "cancel")


def permission_timeout() -> float:
    raw = os.environ.get("SWITCHYARD_PERMISSION_TIMEOUT")
    try:
        return max(0.0, float(raw)) if raw else DEFAULT_TIMEOUT
    except ValueError:
        return DEFAULT_TIMEOUT


def permission_default() -> str:
    value = (os.environ.get("SWITCHYARD_PERMISSION_DEFAULT") or "deny").strip().lower()
    return value if value in DEFAULTS else "deny"


def decision_output(behavior: str, message: str = "", updated_permissions: list | None = None) -> dict:
    """Claude Code's PermissionRequest hook output. An allow carries no message in Claude Code's
    type; a person's message with an allow is shown to the user as the hook's systemMessage."""
    decision: dict = {"behavior": behavior}
    if behavior == "allow" and updated_permissions:
        decision["updatedPermissions"] = updated_permissions
    output: dict = {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": decision}}
    if behavior == "deny":
        decision["message"] = message or "Denied in Switchyard."
    elif message:
        output["systemMessage"] = message
    return output


def await_decision(sender, *, session_id: str, request_id: str, until: float) -> dict | None:
    """The person's answer ({"decision", "answer", "answered_by"}), or None when none came by ``until``
    (a ``time.monotonic()`` value) or Switchyard could not be asked."""
    path = f"sessions/{wire.quote(session_id, safe='')}/input-requests/{wire.quote(request_id, safe='')}/"
    last = False
    while not last:
        left = until - time.monotonic()
        if left <= 0:
            return None
        wait = int(min(POLL_MAX_SECONDS, left))
        if wait == 0:  # less than a second left: wait it out, then look once more
            time.sleep(left)
            last = True
        url = f"{sender.base}/{path}?wait={wait}"
        try:
            status, body = wire.request("GET", url, headers=sender.headers, deadline=time.monotonic() + wait + 5)
        except wire.WireError as exc:
            sender.problems.append(f"waiting for the permission answer: {exc}")
            time.sleep(min(1.0, max(0.0, until - time.monotonic())))
            continue
        if status >= 400 and status not in (429, 502, 503, 504):
            message = body.get("message") if isinstance(body, dict) else body
            sender.problems.append(f"waiting for the permission answer: refused ({status}): {message}")
            return None
        if status == 200 and isinstance(body, dict) and body.get("answered"):
            return body
        if status != 200:
            time.sleep(min(1.0, max(0.0, until - time.monotonic())))
    return None


def chosen_suggestion(answer: dict, suggestions: object) -> list | None:
    """The suggestion the person applied, from this hook's own copy of Claude Code's list (the server
    names it by index only: what reaches Claude Code's settings is what Claude Code offered)."""
    index = answer.get("suggestion")
    if type(index) is not int or not isinstance(suggestions, list) or not 0 <= index < len(suggestions):
        return None
    return [suggestions[index]] if isinstance(suggestions[index], dict) else None


def answer_permission(
    sender, *, session_id: str, request_id: str, until: float, timeout: float, suggestions: object = None
) -> dict | None:
    """Wait for the answer and return the hook output to print (None: print nothing). ``suggestions``:
    the request's ``permission_suggestions`` as the hook recorded them."""
    answer = await_decision(sender, session_id=session_id, request_id=request_id, until=until)
    if answer is not None and answer.get("decision") in ("allow", "deny"):
        who = answer.get("answered_by") or "a person"
        message = str(answer.get("answer") or "")
        if answer["decision"] == "deny":
            return decision_output("deny", f"Denied by {who} in Switchyard" + (f": {message}" if message else "."))
        allowed = f"Allowed by {who} in Switchyard: {message}" if message else ""
        return decision_output("allow", allowed, chosen_suggestion(answer, suggestions))
    _give_up(
        sender, session_id=session_id, what="the permission request", default=permission_default(), timeout=timeout
    )
    return default_output(timeout)


def elicitation_default() -> str:
    value = (os.environ.get("SWITCHYARD_ELICITATION_DEFAULT") or "cancel").strip().lower()
    return value if value in ELICITATION_DEFAULTS else "cancel"


def elicitation_output(action: str, content: dict | None = None) -> dict:
    """Claude Code's Elicitation hook output: the action, with the content of an accept."""
    output: dict = {"hookEventName": "Elicitation", "action": action}
    if action == "accept":
        output["content"] = content if isinstance(content, dict) else {}
    return {"hookSpecificOutput": output}


def elicitation_default_output() -> dict | None:
    default = elicitation_default()
    return None if default == "ask" else elicitation_output(default)


def answer_elicitation(sender, *, session_id: str, request_id: str, until: float, timeout: float) -> dict | None:
    """Wait for the person's form and return the hook output to print (None: print nothing)."""
    answer = await_decision(sender, session_id=session_id, request_id=request_id, until=until)
    if answer is not None and answer.get("decision") in ELICITATION_ACTIONS:
        return elicitation_output(answer["decision"], answer.get("content"))
    what = "the MCP server's question"
    _give_up(sender, session_id=session_id, what=what, default=elicitation_default(), timeout=timeout)
    return elicitation_default_output()


def pre_tool_output(decision: str, reason: str) -> dict:
    """Claude Code's PreToolUse hook output (sdk.d.ts ``PreToolUseHookSpecificOutput``)."""
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": decision,
            "permissionDecisionReason": reason,
        }
    }


def answer_tool_policy(sender, *, verdict: dict, session_id: str, started: float, timeout: float) -> dict | None:
    """The output for a PreToolUse the server's tool policy marks: its deny, or a person's answer."""
    if verdict.get("exceeded"):
        return answer_budget(sender, verdict=verdict, session_id=session_id, started=started, timeout=timeout)
    reason = str(verdict.get("reason") or "Switchyard's tool policy")
    if verdict.get("decision") == "deny":
        return pre_tool_output("deny", f"Denied by {reason}.")
    if verdict.get("decision") != "ask" or not verdict.get("request_id"):
        return None  # a verdict this hook does not know (a newer server): Claude Code decides
    request_id = str(verdict["request_id"])
    answer = None
    if timeout:
        answer = await_decision(sender, session_id=session_id, request_id=request_id, until=started + timeout)
    if answer is not None and answer.get("decision") in ("allow", "deny"):
        who = answer.get("answered_by") or "a person"
        message = str(answer.get("answer") or "")
        verb = "Allowed" if answer["decision"] == "allow" else "Denied"
        text = f"{verb} by {who} in Switchyard ({reason})" + (f": {message}" if message else ".")
        return pre_tool_output(answer["decision"], text)
    default = permission_default()
    _give_up(sender, session_id=session_id, what="the tool policy's question", default=default, timeout=timeout)
    if default == "ask":
        return None
    text = f"Nobody answered {reason} in Switchyard within {timeout:g} s"
    return pre_tool_output(default, f"{text}; denied by default." if default == "deny" else f"{text}; allowed.")


def answer_budget(sender, *, verdict: dict, session_id: str, started: float, timeout: float) -> dict | None:
    """A PreToolUse stopped by an exceeded budget (SPEC §9): the session waits for input ("budget
    exceeded: raise it or stop"). Raised meanwhile (Switchyard answers Allow): no output, the tool use
    goes on as it would have. Stopped (Deny), or nobody in time: a deny with the reason. Whatever
    SWITCHYARD_PERMISSION_DEFAULT says: spending past a budget is never the default. The session is
    left waiting: the budget still stops it, and the next tool use waits on the same question."""
    reason = str(verdict.get("reason") or "Budget exceeded in Switchyard.")
    answer = None
    if timeout and verdict.get("request_id"):
        answer = await_decision(
            sender, session_id=session_id, request_id=str(verdict["request_id"]), until=started + timeout
        )
    if answer is not None and answer.get("decision") == "allow":
        return None
    if answer is not None and answer.get("decision") == "deny":
        who = answer.get("answered_by") or "a person"
        message = str(answer.get("answer") or "")
        return pre_tool_output("deny", f"Stopped by {who} in Switchyard: {reason}" + (f" {message}" if message else ""))
    if not timeout or not verdict.get("request_id"):
        return pre_tool_output("deny", reason)  # nobody can be asked: no wait
    return pre_tool_output("deny", f"{reason} (nobody raised it within {timeout:g} s)")


def default_output(timeout: float) -> dict | None:
    """The configured default decision, for a request nobody answered (None: Claude Code asks)."""
    default = permission_default()
    if default == "ask":
        return None
    message = f"Nobody answered this permission request in Switchyard within {timeout:g} s"
    return decision_output(default, f"{message}; denied by default." if default == "deny" else "")


def _give_up(sender, *, session_id: str, what: str, default: str, timeout: float) -> None:
    """The question is no longer asked: the session goes back to running (a late answer is refused)."""
    reason = f"nobody answered {what} within {timeout:g} s: {default}"
    body = json.dumps({"status": "running", "reason": reason}).encode()
    headers = {**sender.headers, "Content-Type": "application/json"}
    url = f"{sender.base}/sessions/{wire.quote(session_id, safe='')}/transition/"
    try:
        wire.request("POST", url, headers=headers, body=body, deadline=time.monotonic() + 3)
    except wire.WireError as exc:
        sender.problems.append(f"could not move the session back to running: {exc}")


def print_output(output: dict | None) -> None:
    if output is not None:
        sys.stdout.write(json.dumps(output, separators=(",", ":")) + "\n")
        sys.stdout.flush()
