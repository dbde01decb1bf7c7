"""A PreToolUse deferred to a person, in a run a runner started (SPEC §8, issue 26 §2).

Claude Code 2.1.332 in ``-p`` mode takes ``"permissionDecision": "defer"`` from a PreToolUse hook: it
stops at that tool call, ends with ``stop_reason: "tool_deferred"`` and the call in its result's
``deferred_tool_use`` (``{"id", "name", "input"}``), and exits 0. ``claude -p --resume <session>``
later runs PreToolUse again for the same call (same ``tool_use_id``), and does what that hook says.

So where a hand-started session's hook holds the call open while a person answers (answer.py, up to
SWITCHYARD_PERMISSION_TIMEOUT), a runner's run (``SWITCHYARD_DEFER=1``, set by the runner for
Claude Code) records the same question, prints ``defer`` and lets the agent exit: the runner reports
the run ``waiting``, and the answer, however late, resumes it with ``SWITCHYARD_DEFERRED`` naming the
call and the person's decision, which ``decided`` turns into this hook's answer to that PreToolUse.

Which calls need a person:
- the server's tool policy says "ask", or an exceeded budget stops the call (the tool call's answer
  carries the verdict and the question's id, as for a hand-started session);
- Claude Code would ask permission (``would_ask``): PreToolUse runs before Claude Code's own check,
  so the hook reads the run's ``--allowedTools`` (``SWITCHYARD_ALLOWED_TOOLS``, from the runner) and
  the payload's ``permission_mode`` as Claude Code does for the tools that ask (Bash, file edits,
  web, MCP). A rule it does not read (a path-scoped ``Write(src/**)``) counts as not allowing: the
  person is asked, never skipped. A permission Claude Code asks for anyway reaches the
  PermissionRequest hook, which waits as in a hand-started session.

Only the main agent's calls are deferred: a subagent's (the Agent tool's) question waits in the hook as
in a hand-started session, since the resume re-asks the main conversation's pending call.

Only the standard library is imported here, and not all of it (see wire.py).
"""

from __future__ import annotations

import os
import sys

from switchyard_client.hook.lean_json import dumps, loads

# Claude Code's tools that ask before they run (its tools reference, "Permission required"); MCP
# tools (mcp__*) ask too. Read, Glob, Grep, LS, TodoWrite, Agent and the like never do.
ASKING_TOOLS = frozenset({"Bash", "Write", "Edit", "MultiEdit", "NotebookEdit", "WebFetch", "WebSearch"})
EDIT_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})
# Modes in which Claude Code never asks: it allows (bypassPermissions), refuses (dontAsk, plan) or
# decides by its classifier (auto).
SILENT_MODES = frozenset({"bypassPermissions", "dontAsk", "plan", "auto"})
REASON_MAX = 500


def enabled() -> bool:
    """In a run a runner started for a CLI that takes ``defer`` (the runner says so)."""
    return os.environ.get("SWITCHYARD_DEFER") == "1" and bool(os.environ.get("SWITCHYARD_RUN"))


def decided(payload: dict) -> dict | None:
    """The person's answer to this very call, when this run resumes after deferring it:
    ``{"tool_use_id", "kind", "decision", "message", "answered_by"}``; else None."""
    raw = os.environ.get("SWITCHYARD_DEFERRED")
    if not raw:
        return None
    try:
        answer = loads(raw)
    except ValueError:
        return None
    if not isinstance(answer, dict) or answer.get("decision") not in ("allow", "deny"):
        return None
    call = str(payload.get("tool_use_id") or "")
    return answer if call and call == str(answer.get("tool_use_id") or "") else None


def decided_output(answer: dict) -> tuple[str, str] | None:
    """``(permissionDecision, reason)`` for the resumed call; None: no decision of the hook's (an
    exceeded budget raised: the call goes on as any other, through every check again)."""
    who = str(answer.get("answered_by") or "a person")
    message = str(answer.get("message") or "")
    if answer["decision"] == "allow":
        if answer.get("kind") == "budget":
            return None
        return "allow", f"Allowed by {who} in Switchyard" + (f": {message}" if message else ".")
    what = "Stopped" if answer.get("kind") == "budget" else "Denied"
    return "deny", f"{what} by {who} in Switchyard" + (f": {message}" if message else ".")


def defer_output(question: str) -> dict:
    reason = f"Waiting for a person in Switchyard: {question}"[:REASON_MAX]
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "defer",
            "permissionDecisionReason": reason,
        }
    }


def print_defer(question: str) -> None:
    sys.stdout.write(dumps(defer_output(question), separators=(",", ":")) + "\n")
    sys.stdout.flush()


def allowed_rules(raw: str | None = None) -> list[str]:
    """``--allowedTools`` as Claude Code reads it: rules separated by commas or blanks, a rule's
    ``(...)`` kept whole (``Bash(npm test:*)`` holds a blank)."""
    raw = os.environ.get("SWITCHYARD_ALLOWED_TOOLS", "") if raw is None else raw
    rules, word, depth = [], "", 0
    for char in raw:
        if char == "(":
            depth += 1
        elif char == ")":
            depth = max(0, depth - 1)
        if depth == 0 and (char == "," or char.isspace()):
            if word:
                rules.append(word)
            word = ""
        else:
            word += char
    if word:
        rules.append(word)
    return rules


def _rule_allows(rule: str, tool: str, tool_input: dict) -> bool:
    name, _, rest = rule.partition("(")
    if not rest:
        # A tool's name; an MCP server's (mcp__github, or mcp__github__*) covers its tools.
        if name == tool:
            return True
        server = name[:-3] if name.endswith("__*") else name
        return name.startswith("mcp__") and name.count("__") <= 2 and tool.startswith(server + "__")
    if name != tool or tool != "Bash" or not rest.endswith(")"):
        return False  # a path- or domain-scoped rule: not read here, so the person is asked
    spec, command = rest[:-1], str(tool_input.get("command") or "").strip()
    if spec.endswith(":*"):
        prefix = spec[:-2]
        return command == prefix or command.startswith(prefix + " ")
    if spec.endswith("*"):
        return command.startswith(spec[:-1])
    return command == spec


def _inside(path: str, folder: str) -> bool:
    if not path or not folder:
        return False
    path = os.path.normpath(os.path.join(folder, path))
    folder = os.path.normpath(folder)
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def would_ask(payload: dict, rules: list[str] | None = None) -> bool:
    """Whether Claude Code would ask a person before this PreToolUse's call (see the module docstring)."""
    tool = str(payload.get("tool_name") or "")
    mode = str(payload.get("permission_mode") or "default")
    if mode in SILENT_MODES or not (tool in ASKING_TOOLS or tool.startswith("mcp__")):
        return False
    tool_input = payload.get("tool_input") if isinstance(payload.get("tool_input"), dict) else {}
    if mode == "acceptEdits" and tool in EDIT_TOOLS:
        path = str(tool_input.get("file_path") or tool_input.get("notebook_path") or "")
        if _inside(path, str(payload.get("cwd") or "")):
            return False
    rules = allowed_rules() if rules is None else rules
    return not any(_rule_allows(rule, tool, tool_input) for rule in rules)
