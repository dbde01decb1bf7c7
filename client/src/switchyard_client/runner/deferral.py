"""A run whose agent deferred a tool call to a person (SPEC §8, issue 26 §2): the runner's side.

- Its agent's environment says the hook may defer (``SWITCHYARD_DEFER=1``, for a provider whose hooks
  are `switchyard hook`'s: Claude Code), which tools its argv allows (``SWITCHYARD_ALLOWED_TOOLS``, so
  the hook knows what Claude Code would ask about: hook/defer.py) and, when it resumes with a
  person's answer, that answer (``SWITCHYARD_DEFERRED``).
- Its end: Claude Code exits 0 with a ``result`` line carrying ``deferred_tool_use`` (and
  ``stop_reason: "tool_deferred"``); the runner reports the run ``waiting`` instead of succeeded,
  keeps its worktree (and Claude Code's session, in the run's home) and forgets the process.
- Its resume: the long poll hands the answered run back (``deferred`` in the assignment); launch.py
  starts ``resume_command`` on the deferred session, in the folder it worked in.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from switchyard_client.runner.config import ProviderConfig
from switchyard_client.runner.state import RunState

TAIL_BYTES = 256 * 1024  # the result line is the last one; a huge final text still fits
ALLOWED_OPTIONS = ("--allowedTools", "--allowed-tools")


def allowed_tools(argv: list[str]) -> str:
    """The value(s) of the argv's ``--allowedTools`` (Claude Code takes several words after it, up
    to the next option, or one glued with ``=``), joined with commas; '' when it has none."""
    found: list[str] = []
    taking = False
    for word in argv:
        if taking and not word.startswith("-"):
            found.append(word)
            continue
        taking = word in ALLOWED_OPTIONS
        for option in ALLOWED_OPTIONS:
            if word.startswith(option + "="):
                found.append(word[len(option) + 1 :])
    return ",".join(found)


def defer_env(argv: list[str], *, provider: ProviderConfig, assignment: dict[str, Any]) -> dict[str, str]:
    """What the hook needs to defer, and to answer a resumed call (see the module docstring)."""
    if not provider.hooks:
        return {}
    env = {"SWITCHYARD_DEFER": "1", "SWITCHYARD_ALLOWED_TOOLS": allowed_tools(argv)}
    answer = assignment.get("deferred")
    if isinstance(answer, dict) and answer.get("decision") in ("allow", "deny"):
        keys = ("tool_use_id", "kind", "decision", "message", "answered_by")
        env["SWITCHYARD_DEFERRED"] = json.dumps({k: answer.get(k) or "" for k in keys})
    return env


def deferred_tool_use(log_path: str) -> dict[str, str] | None:
    """The call Claude Code stopped at, from the last ``result`` line of its stream-json log:
    ``{"tool_use_id", "tool_name"}``; None when it ended otherwise."""
    try:
        with open(log_path, "rb") as fh:
            fh.seek(max(0, os.path.getsize(log_path) - TAIL_BYTES))
            tail = fh.read().decode("utf-8", "replace")
    except OSError:
        return None
    for line in reversed(tail.splitlines()):
        if not line.startswith("{") or '"result"' not in line:
            continue
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if not isinstance(item, dict) or item.get("type") != "result":
            continue
        call = item.get("deferred_tool_use")
        if not isinstance(call, dict) or not call.get("id"):
            return None
        return {"tool_use_id": str(call["id"])[:200], "tool_name": str(call.get("name") or "")[:200]}
    return None


def parked_log(state: RunState, *, root: Path, exit_folder: Path) -> None:
    """An answered waiting run goes on writing the job log it waited with (``deferred.log_path``,
    under the runner's root), from its end: the server's copy of the session log holds those bytes
    already, and ships by offset, so a log begun afresh would have its first bytes taken as sent."""
    parked = state.assignment.get("deferred")
    relative = str(parked.get("log_path") or "") if isinstance(parked, dict) else ""
    path = (root / relative).resolve() if relative else None
    if state.log_path or path is None or not path.is_file() or not path.is_relative_to(root.resolve()):
        return
    size, lines, last = 0, 0, b"\n"
    with open(path, "rb") as fh:
        while chunk := fh.read(1024 * 1024):
            size, lines, last = size + len(chunk), lines + chunk.count(b"\n"), chunk[-1:]
    state.log_path, state.exit_path = str(path), str(exit_folder / f"{state.id}.exit")
    # Every byte of it was shipped and parsed before the run waited (worker.py: _park).
    state.shipped = state.parsed = size
    state.parsed_lines = lines + (0 if last == b"\n" else 1)
