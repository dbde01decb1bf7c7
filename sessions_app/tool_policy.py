"""The server's policy for tool uses: which PreToolUse a person must allow first ("ask"), which are
refused at once ("deny"), which go ahead ("allow", the default when no rule matches).

Rules are ``ToolPolicy`` rows, edited in the admin: an agent's own rules first, then the global ones
(no agent), each list by ``position``; the first enabled rule that matches decides. A pattern is
``Tool`` or ``Tool(argument)``:

- ``Tool`` is a shell-style glob (``fnmatch``, case-sensitive) on the tool's name: ``Write``,
  ``mcp__*``, ``mcp__github__*``, ``*``.
- ``argument`` is a glob on the tool's key input field: ``command`` for Bash, ``file_path`` for
  Read/Write/Edit/MultiEdit (``notebook_path`` for NotebookEdit), ``url`` for WebFetch, ``query``
  for WebSearch, ``pattern`` for Glob/Grep, ``subagent_type`` for Task/Agent; for any other tool the
  input as compact JSON. ``Bash(rm *)`` matches ``rm -rf build``, ``Write(*.env)`` a write to
  ``.env`` (``*`` crosses ``/``, as in fnmatch).

No spelling of a command or a path gets past a rule (tool_policy_shell.py, tool_policy_glob.py):

- Bash: the command is parsed into the simple commands it runs, quotes, backslashes and blanks
  normalised and a command's path reduced to its name (``/bin/rm`` is ``rm``), with the commands
  that wrappers run (``sudo``, ``env``, ``xargs``, ``bash -c '...'``, ...). An "ask" or "deny" rule
  matches when it matches the command as written or any of those commands, and a command the server
  cannot read (a syntax error, ``$CMD``, ``curl x | sh``) matches every one of them. Each command
  is decided on its own and the call gets the most severe verdict (tool_policy_match.py): an
  "allow" rule exempts ``pytest -q`` but not ``pytest -q; rm -rf /``.
- File tools: the path is resolved against the call's ``cwd`` (the one the hook sends, else the
  session's) when relative, and ``//``, ``.`` and ``..`` collapsed (``/tmp/../etc/passwd`` is
  ``/etc/passwd``), without following links (the server cannot see the agent's disk). A rule matches
  the absolute path or, inside the cwd, the path relative to it; "ask" and "deny" also match the
  path as written.

`switchyard hook` records each PreToolUse as a running tool call; the call's answer carries the
verdict (``policy``), so a tool no rule marks costs no extra request. For "ask" the question is
recorded here (an ``input_request`` with choices allow / deny, client id ``policy-<call id>``) and the
session waits for input; the hook long-polls its answer as for a PermissionRequest and prints
Claude Code's ``permissionDecision``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Q

from config.actors import Actor
from config.api.errors import DomainError
from sessions_app.live import session_push
from sessions_app.models import AgentSession, StreamEvent, ToolPolicy
from sessions_app.permission_requests import PERMISSION_CHOICES
from sessions_app.services import append_system_event, session_transition
from sessions_app.tool_policy_match import Rule, ToolUse, deciding_rule

PATTERN = re.compile(r"^(?P<tool>[^()\s]+)(?:\((?P<argument>.*)\))?$", re.DOTALL)
INPUT_SHOWN_CHARS = 4000


@dataclass(frozen=True)
class Verdict:
    decision: str  # "ask" or "deny" (an allow needs no verdict)
    pattern: str
    note: str = ""
    request_id: str = ""

    @property
    def reason(self) -> str:
        why = f" ({self.note})" if self.note else ""
        return f"Switchyard's tool policy {self.pattern!r}{why}"

    def as_dict(self) -> dict:
        body = {"decision": self.decision, "pattern": self.pattern, "reason": self.reason}
        if self.request_id:
            body["request_id"] = self.request_id
        return body


def tool_policy_pattern_parse(pattern: str) -> tuple[str, str | None]:
    """``(tool glob, argument glob or None)``; a DomainError says what is expected."""
    found = PATTERN.match((pattern or "").strip())
    if not found:
        raise DomainError(
            f"{pattern!r} is not a tool pattern: write Tool or Tool(argument), e.g. Bash(rm *), Write, mcp__*."
        )
    return found["tool"], found["argument"]


def tool_policy_rule(*, agent_id: int, tool_name: str, tool_input: object, cwd: str = "") -> ToolPolicy | None:
    """The enabled rule for this agent (its own, then the global ones) that decides this use; None
    when none does. One query."""
    rules = ToolPolicy.objects.filter(Q(agent_id=agent_id) | Q(agent__isnull=True), enabled=True)
    parsed = []
    for rule in sorted(rules, key=lambda r: (r.agent_id is None, r.position, r.pk)):
        try:
            tool, argument = tool_policy_pattern_parse(rule.pattern)
        except DomainError:
            continue  # the admin refuses such a pattern; one saved otherwise matches nothing
        parsed.append(Rule(tool, argument, rule.action, rule))
    decided = deciding_rule(parsed, ToolUse(tool_name, tool_input, cwd))
    return decided.source if decided else None


def tool_use_verdict(
    *,
    actor: Actor,
    session: AgentSession,
    call_id: int,
    tool_name: str,
    tool_input: object,
    input_shown: str,
    cwd: str = "",
) -> Verdict | None:
    """The policy's verdict on a tool use just recorded as running call ``call_id``: None to go
    ahead; a deny; or an ask, whose question is recorded and the session moved to waiting for input.
    ``input_shown`` is the call's stored (redacted, capped) input, shown to the person asked; ``cwd``
    the folder it runs in (else the session's, as its hook recorded it)."""
    if not cwd and isinstance(session.metadata, dict):
        cwd = str(session.metadata.get("cwd") or "")
    rule = tool_policy_rule(agent_id=session.agent_id, tool_name=tool_name, tool_input=tool_input, cwd=cwd)
    if rule is None or rule.action == ToolPolicy.Action.ALLOW:
        return None
    if rule.action == ToolPolicy.Action.DENY:
        return Verdict("deny", rule.pattern, rule.note)
    request_id = f"policy-{call_id}"
    try:
        tool_use_ask(
            actor=actor, session=session, request_id=request_id, tool_name=tool_name, input_shown=input_shown, rule=rule
        )
    except DomainError as error:  # the session cannot wait (it ended): nobody can allow it
        return Verdict("deny", rule.pattern, f"nobody can be asked: {error.message}")
    return Verdict("ask", rule.pattern, rule.note, request_id=request_id)


@transaction.atomic
def tool_use_ask(
    *, actor: Actor, session: AgentSession, request_id: str, tool_name: str, input_shown: str, rule: ToolPolicy
) -> StreamEvent:
    """Record the question (once per call: a retried request finds it) and make the session wait."""
    existing = StreamEvent.objects.filter(session=session, client_id=request_id).first()
    if existing is not None:
        return existing
    try:
        shown: object = json.loads(input_shown) if input_shown else None
    except ValueError:
        shown = input_shown[:INPUT_SHOWN_CHARS]
    payload = {
        "hook": "PreToolUse",
        "tool_name": tool_name,
        "tool_input": shown,
        "question": f"Allow {tool_name}? Switchyard's tool policy asks: {rule.pattern}"
        + (f" ({rule.note})" if rule.note else ""),
        "choices": list(PERMISSION_CHOICES),
        "policy": rule.pattern,
    }
    event = append_system_event(session=session, type=StreamEvent.Type.INPUT_REQUEST, payload=payload)
    # The hook long-polls the question by this id (permission_requests.input_request_get).
    event.client_id = request_id
    event.save(update_fields=["client_id"])
    session_push(session_id=session.pk, seqs=(event.seq, event.seq))
    session_transition(
        actor=actor, session=session, status=AgentSession.Status.WAITING_FOR_INPUT, reason=payload["question"]
    )
    return event
