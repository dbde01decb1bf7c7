"""Shipping an agent's log to Switchyard by byte offset, and turning structured output into stream
events.

The server appends a chunk only past what it already has (``POST /runs/{id}/log/?offset=``), so
sending a chunk twice — after a lost answer, or from a restarted runner whose state file lagged —
never doubles a byte. Events carry client ids made of the run and the line they came from, so
re-reading lines after a restart adds nothing either.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from switchyard_client.api.client import Client
from switchyard_client.api.errors import ConnectionFailed, SwitchyardError
from switchyard_client.runner import gemini_output
from switchyard_client.runner.codex_output import TYPES as CODEX_TYPES
from switchyard_client.runner.codex_output import codex_events, codex_spans, otlp_traces
from switchyard_client.runner.state import RunState

# The most one request carries: the whole backlog up to the server's RUNNER_LOG_CHUNK_MAX_BYTES
# (64 MiB by default), streamed from the file in PIECE reads; the server fsyncs once per request.
CHUNK = 64 * 1024 * 1024
SMALL_CHUNK = 1024 * 1024  # after a 413: a server whose limit is lower (older servers took 1 MiB)
PIECE = 1024 * 1024
TEXT_MAX = 4000
EVENTS_PER_BATCH = 500
PARSE_MAX = 4 * 1024 * 1024  # log bytes turned into events per tick, at most


# What the server takes as a provider's session id (runners/api/serializers.py RunStatusInput).
AGENT_SESSION = re.compile(r"[A-Za-z0-9._:-]{1,200}")
# The output events (events_from_line's "event") that name the provider's own session, and where.
SESSION_EVENTS = {"system/init": "session_id", "init": "session_id", "thread.started": "thread_id"}
# The output events that say why the agent gave up: their message leads a failed run's error.
AGENT_ERRORS = ("turn.failed", "error")


class LeaseLost(Exception):
    """The server says another attempt (or nobody) holds this run now: stop and forget it."""


def is_lease_lost(exc: SwitchyardError) -> bool:
    body = exc.body if isinstance(exc.body, dict) else {}
    return exc.status == 409 and (body.get("code") == "lease_lost" or body.get("error") == "lease_lost")


Body = Callable[[], Iterator[bytes]]


def ship_log(
    send: Callable[[int, int, Body], dict[str, Any]], log_path: str | Path, offset: int, *, chunk: int = CHUNK
) -> int:
    """Send what the file has past ``offset``, up to ``chunk`` bytes a request; returns the offset the
    server now has.

    ``send(offset, length, body)`` POSTs ``length`` bytes and returns the answer's JSON; ``body()``
    yields them from the file, afresh on every call (a retry reads them again). A 409 naming the
    server's size (it has less than we thought: a lost file, another attempt's log) moves to that
    size and goes on from there. Network errors propagate: the caller tries again on its next tick."""
    try:
        size = Path(log_path).stat().st_size
    except FileNotFoundError:
        return offset
    if size <= offset:  # nothing new: most ticks of a quiet agent end here, without opening the file
        return offset
    with open(log_path, "rb") as fh:
        while offset < size:
            length = min(chunk, size - offset)
            try:
                answer = send(offset, length, _pieces(fh.fileno(), offset, length))
            except SwitchyardError as exc:
                body = exc.body if isinstance(exc.body, dict) else {}
                if is_lease_lost(exc):
                    raise LeaseLost(str(exc)) from exc
                if exc.status == 413 and chunk > SMALL_CHUNK:
                    chunk = SMALL_CHUNK
                    continue
                if exc.status == 409 and isinstance(body.get("offset"), int) and body["offset"] != offset:
                    offset = body["offset"]
                    continue
                raise
            new = answer.get("offset") if isinstance(answer, dict) else None
            offset = new if isinstance(new, int) and new > offset else offset + length
    return offset


def _pieces(fd: int, start: int, length: int) -> Body:
    def read() -> Iterator[bytes]:
        at, end = start, start + length
        while at < end:
            data = os.pread(fd, min(PIECE, end - at), at)
            if not data:  # the log never shrinks; if it did, the request fails short and is retried
                return
            yield data
            at += len(data)

    return read


def last_lines(log_path: str | Path, count: int = 20, *, max_bytes: int = 64 * 1024) -> str:
    try:
        with open(log_path, "rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - max_bytes))
            tail = fh.read()
    except OSError:
        return ""
    return "\n".join(tail.decode("utf-8", errors="replace").splitlines()[-count:])


# --- structured output → stream events ------------------------------------------------------------------
def _text(value: Any, limit: int = TEXT_MAX) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit] + f"... [{len(text)} chars]"


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return _text(content)


def _result(line: dict[str, Any], provider: str) -> dict[str, Any]:
    # Claude Code says how it ended in subtype/is_error.
    keep = ("subtype", "is_error", "status", "total_cost_usd", "usage", "num_turns", "duration_ms", "session_id")
    payload = {"source": provider, "event": "result", **{k: line[k] for k in keep if k in line}}
    if "result" in line:
        payload["message"] = _text(line["result"])
    return payload


def events_from_line(line: dict[str, Any], *, provider: str, hooks: bool) -> list[tuple[str, dict[str, Any]]]:
    """(type, payload) for one JSON line of Claude Code stream-json, Gemini stream-json or Codex --json.

    With ``hooks`` the agent's hooks already recorded its tool calls: only its words, its start and
    its result (cost, usage) are taken from the output, so nothing is recorded twice."""
    if gemini_output.is_gemini(line):
        return gemini_output.events_from_line(line, provider=provider, hooks=hooks)
    kind = str(line.get("type") or "")
    out: list[tuple[str, dict[str, Any]]] = []
    if kind == "result":
        return [("log", _result(line, provider))]
    if kind in CODEX_TYPES:  # codex_output.py
        return codex_events(line, provider=provider, hooks=hooks)
    if kind == "error":  # Codex's (Gemini's are gemini_output.py's)
        payload = {"source": provider, "event": kind}
        for key in ("error", "message"):
            if key in line:
                payload[key] = _text(line[key])
        return [("log", payload)]
    if kind == "system":
        payload = {"source": provider, "event": f"{kind}/{line['subtype']}" if line.get("subtype") else kind}
        for key in ("session_id", "sessionId", "model", "cwd"):
            if key in line:
                payload[key] = line[key]
        return [("log", payload)]
    if kind in ("assistant", "user"):  # Claude Code: a message with content blocks
        content = (line.get("message") or {}).get("content") or []
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            btype = block.get("type")
            if btype == "text" and kind == "assistant" and block.get("text"):
                out.append(("log", {"source": provider, "message": _text(block["text"])}))
            elif btype == "tool_use" and not hooks:
                payload = {"source": provider, "tool": block.get("name"), "tool_use_id": block.get("id")}
                out.append(("tool_started", {**payload, "input": _text(block.get("input"), 2000)}))
            elif btype == "tool_result" and not hooks:
                payload = {"source": provider, "tool_use_id": block.get("tool_use_id")}
                payload.update(
                    is_error=bool(block.get("is_error")), output=_text(_content_text(block.get("content")), 2000)
                )
                out.append(("tool_finished", payload))
        return out
    return []


@dataclass
class Slice:
    """What a slice of the log holds: its stream events, the OTLP spans of the tool calls and tokens
    of Codex's lines (codex_output.py), and how much of it was used (bytes, lines)."""

    events: list[dict[str, Any]] = field(default_factory=list)
    spans: list[dict[str, Any]] = field(default_factory=list)
    used: int = 0
    lines: int = 0


def parse_slice(
    data: bytes, *, start_line: int, provider: str, hooks: bool, run_id: int, session: str = "", final: bool = False
) -> Slice:
    """Stream events (and Codex's spans) for the complete lines of ``data`` (all of it when ``final``).

    Lines that are not JSON objects (stderr, progress text) count for the numbering and are skipped."""
    out = Slice(used=data.rfind(b"\n") + 1 if not final else len(data))
    number = start_line
    lines = data[: out.used].split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    for raw in lines:
        number += 1
        raw = raw.strip()
        if not raw.startswith(b"{"):
            continue
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(line, dict):
            continue
        made = [
            {"id": f"run{run_id}-l{number}-{index}", "type": etype, "payload": payload}
            for index, (etype, payload) in enumerate(events_from_line(line, provider=provider, hooks=hooks))
        ]
        out.events += made
        if made and str(line.get("type")) in CODEX_TYPES:
            out.spans += codex_spans(made, session=session)
    out.lines = number - start_line
    return out


def parse_lines(
    data: bytes, *, start_line: int, provider: str, hooks: bool, run_id: int, final: bool = False
) -> tuple[list[dict[str, Any]], int, int]:
    """(events, bytes consumed, lines consumed) of parse_slice."""
    got = parse_slice(data, start_line=start_line, provider=provider, hooks=hooks, run_id=run_id, final=final)
    return got.events, got.used, got.lines


def run_log_ship(state: RunState, api: Client) -> int | None:
    """Send a run's log from ``state.shipped`` on, with the runner's key: the offset shipped to, or None
    when the server did not take it now (unreachable, or refused: the next tick tries again). Raises
    LeaseLost when the run is not this runner's any more."""
    s = state

    def send(offset: int, length: int, body) -> dict[str, Any]:
        params = {"offset": offset, "attempt": s.attempt}
        # A Content-Length, not chunked: the server refuses an oversized body before reading it.
        headers = {"Content-Type": "application/octet-stream", "Content-Length": str(length)}
        path = f"runs/{s.id}/log/"
        return api.request("POST", path, content_stream=body, params=params, headers=headers).json()

    try:
        return ship_log(send, s.log_path, s.shipped)
    except ConnectionFailed:
        return None
    except SwitchyardError as exc:
        if exc.status == 403 or exc.status == 404:
            raise LeaseLost(exc.message) from exc
        return None


def run_events_ship(state: RunState, agent: Client | None, *, hooks: bool, final: bool) -> bool:
    """The stream events of the next slice (PARSE_MAX bytes at most) of the shipped log, sent with the
    run's key; ``final``: the log is complete, its last line too. True if the slice was used."""
    s = state
    if agent is None or s.parsed >= s.shipped:
        return False
    with open(s.log_path, "rb") as fh:
        fh.seek(s.parsed)
        data = fh.read(min(s.shipped - s.parsed, PARSE_MAX))
    got = parse_slice(
        data,
        start_line=s.parsed_lines,
        provider=s.provider,
        hooks=hooks,
        run_id=s.id,
        session=s.session,
        # A slice with no end of line in it is one giant line: take it whole (not JSON we can use)
        # rather than wait for a newline forever.
        final=(final and s.parsed + len(data) >= s.shipped) or (len(data) == PARSE_MAX and b"\n" not in data),
    )
    events = got.events
    s.agent_session = agent_session_in(events) or s.agent_session
    s.agent_error = agent_error_in(events) or s.agent_error
    for start in range(0, len(events), EVENTS_PER_BATCH):
        try:
            agent.events_append(s.session, events[start : start + EVENTS_PER_BATCH])
        except ConnectionFailed:
            return False  # the same lines are read again next tick: same ids, nothing doubled
        except SwitchyardError:
            break  # refused (the key was revoked, a payload too big): drop these, go on
    if not hooks and not tool_calls_ship(agent, s.session, data[: got.used]):
        return False  # Gemini's tool calls to the ledger: read again next tick, recorded once
    if got.spans and not spans_send(agent, got.spans, provider=s.provider):
        return False  # read again next tick: the same span ids, recorded once
    s.parsed += got.used
    s.parsed_lines += got.lines
    return got.used > 0


def spans_send(agent: Client, spans: list[dict[str, Any]], *, provider: str) -> bool:
    """Codex's tool calls and tokens to the server's OTLP receiver, with the run's key: False when
    the server could not be reached (try again), True when it took them or refused them for good."""
    try:
        agent.request("POST", "otlp/v1/traces", json=otlp_traces(spans, provider=provider))
    except ConnectionFailed:
        return False
    except SwitchyardError:
        pass  # refused (a revoked key, a closed session): as events, dropped
    return True


def tool_calls_ship(agent: Client, session: str, data: bytes) -> bool:
    """The tool calls in these log lines, to the session's ledger (Gemini's: gemini_output.py; Claude
    Code's are its hooks'); False when the server could not be reached (the lines are read again).
    Idempotent by the CLI's call ids: a start sent again is the same row, a finish again a 200."""
    starts, finishes = gemini_output.tool_calls_in(data)
    try:
        for first in range(0, len(starts), EVENTS_PER_BATCH):
            agent.tool_calls_record(session, starts[first : first + EVENTS_PER_BATCH])
        for finish in finishes:
            call = finish.pop("id")
            with contextlib.suppress(SwitchyardError):  # its start was refused, or it is finished already
                agent.tool_call_finish_by_client_id(session, call, **finish)
    except ConnectionFailed:
        return False
    except SwitchyardError:
        pass  # refused (the key was revoked): the events went, the ledger goes without these
    return True


def agent_session_in(events: list[dict[str, Any]]) -> str:
    """The provider's session id named by the last of ``events`` that names one (Claude Code's
    ``system/init``, Gemini's ``init``, Codex's ``thread.started``), else ''."""
    found = ""
    for event in events:
        payload = event.get("payload") or {}
        key = SESSION_EVENTS.get(str(payload.get("event") or ""))
        value = payload.get(key) if key else None
        if isinstance(value, str) and AGENT_SESSION.fullmatch(value):
            found = value
    return found


def agent_error_in(events: list[dict[str, Any]]) -> str:
    """What the last of ``events`` that reports the agent's own failure says (Codex's ``turn.failed``
    and ``error``: an API error, a refused key; Gemini's failed ``result``), else ''."""
    found = ""
    for event in events:
        payload = event.get("payload") or {}
        if payload.get("event") in AGENT_ERRORS and isinstance(payload.get("message"), str):
            found = payload["message"].strip()[:1000] or found
        elif payload.get("event") == "result" and isinstance(payload.get("error"), str):
            found = payload["error"].strip()[:1000] or found
    return found
