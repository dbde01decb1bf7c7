"""Gemini CLI's headless output (``--output-format stream-json``) as stream events and tool calls.

As Gemini CLI 0.61.0 prints it (its StreamJsonFormatter), one JSON object a line, each with a
``timestamp``:
- ``init``: ``session_id`` (the ``--session-id`` it was given, or the one it resumed) and ``model``;
- ``message``: ``role`` user (the prompt) or assistant, ``content``; the assistant's words come in
  pieces as the model streams them (``delta``: true), each its own line;
- ``tool_use``: ``tool_name``, ``tool_id``, ``parameters``; ``tool_result``: ``tool_id``, ``status``
  (success or error), ``output``, and on error ``error`` {type, message};
- ``error``: ``severity`` (warning or error), ``message``: said and gone on (a retry, a loop warning);
- ``result``: the end, ``status`` success or error (then ``error`` {type, message}: an API error,
  the turn limit, a cancel), ``stats`` (tokens in, out, cached, per model, and tool calls).

The tool calls also go to the session's ledger (no hook of Gemini's reports them): each ``tool_use``
is a running call under the CLI's ``tool_id``, finished by its ``tool_result``. Both are idempotent by
that id, so lines read again after a runner restart record nothing twice.
"""

from __future__ import annotations

import json
from typing import Any

TEXT_MAX = 4000
TOOL_TEXT_MAX = 2000
# The ledger's id of a call is the CLI's tool_id: the CLI makes them unique in a session.
CLIENT_ID_MAX = 128


def is_gemini(line: dict[str, Any]) -> bool:
    """A line of Gemini's stream-json. ``result`` and ``error`` lines are also Claude Code's and
    Codex's: Gemini's result has ``stats``, its error a ``severity``."""
    kind = line.get("type")
    if kind == "result":
        return "stats" in line and "subtype" not in line
    if kind == "error":
        return "severity" in line
    return kind in ("init", "message", "tool_use", "tool_result")  # Claude's init is system/init


def _text(value: Any, limit: int = TEXT_MAX) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit] + f"... [{len(text)} chars]"


def error_message(line: dict[str, Any]) -> str:
    """What a failed ``result`` says went wrong (the CLI's own words: "[API Error: ...]"), else ''."""
    if line.get("type") != "result" or line.get("status") != "error":
        return ""
    error = line.get("error")
    message = error.get("message") if isinstance(error, dict) else error
    return _text(message or "the Gemini CLI ended with an error", TEXT_MAX)


def events_from_line(line: dict[str, Any], *, provider: str, hooks: bool) -> list[tuple[str, dict[str, Any]]]:
    """(type, payload) stream events for one Gemini line; ``hooks``: tool calls are recorded by the
    agent's hooks already, so none are taken from the output."""
    kind = str(line.get("type") or "")
    base: dict[str, Any] = {"source": provider}
    if kind == "init":
        return [("log", {**base, "event": "init", **{k: line[k] for k in ("session_id", "model") if k in line}})]
    if kind == "message":
        if line.get("role") == "assistant" and line.get("content"):
            return [("log", {**base, "message": _text(line["content"])})]
        return []
    if kind in ("tool_use", "tool_result"):
        if hooks:
            return []
        # Claude Code's keys (tool, tool_use_id, input / is_error, output), so every provider's reads alike.
        base.update(tool_use_id=line.get("tool_id"))
        if kind == "tool_use":
            return [("tool_started", {**base, "tool": line.get("tool_name"), "input": _text(line.get("parameters"))})]
        failed = line.get("status") != "success"
        payload = {**base, "is_error": failed, "output": _text(line.get("output") or "", TOOL_TEXT_MAX)}
        if failed and line.get("error"):
            payload["error"] = _text(line["error"], TOOL_TEXT_MAX)
        return [("tool_finished", payload)]
    if kind == "error":
        said = {"severity": str(line.get("severity") or ""), "message": _text(line.get("message") or "")}
        return [("log", {**base, "event": "error", **said})]
    if kind == "result":
        payload = {**base, "event": "result", "status": line.get("status"), "stats": line.get("stats")}
        if error_message(line):
            payload["error"] = error_message(line)
        return [("log", payload)]
    return []


def tool_call_start(line: dict[str, Any]) -> dict[str, Any] | None:
    """A ``tool_use`` line as a running call for the ledger (POST sessions/<id>/tool-calls/)."""
    if line.get("type") != "tool_use" or not _client_id(line):
        return None
    call = {"id": _client_id(line), "tool_name": str(line.get("tool_name") or "tool")[:200]}
    if "parameters" in line:
        call["input"] = line["parameters"]
    if isinstance(line.get("timestamp"), str):
        call["started_at"] = line["timestamp"]
    return call


def tool_call_finish(line: dict[str, Any]) -> dict[str, Any] | None:
    """A ``tool_result`` line as the finish of its call: the client id and the finish's fields."""
    if line.get("type") != "tool_result" or not _client_id(line):
        return None
    failed = line.get("status") != "success"
    finish: dict[str, Any] = {"id": _client_id(line), "status": "failure" if failed else "success"}
    finish["output"] = line.get("output") or ""
    if failed:
        error = line.get("error")
        finish["error"] = _text((error.get("message") if isinstance(error, dict) else error) or "the tool failed")
    if isinstance(line.get("timestamp"), str):
        finish["finished_at"] = line["timestamp"]
    return finish


def _client_id(line: dict[str, Any]) -> str:
    value = line.get("tool_id")
    return value if isinstance(value, str) and 0 < len(value) <= CLIENT_ID_MAX else ""


def tool_calls_in(data: bytes) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The calls started and the calls finished in ``data`` (complete lines of the log), in order."""
    starts, finishes = [], []
    for raw in data.split(b"\n"):
        raw = raw.strip()
        if b'"tool_' not in raw:  # most lines are skipped unparsed
            continue
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if isinstance(line, dict):
            start, finish = tool_call_start(line), tool_call_finish(line)
            if start:
                starts.append(start)
            if finish:
                finishes.append(finish)
    return starts, finishes
