"""What the Codex CLI prints with `codex exec --json` (checked against 0.171.0), turned into a run's
stream events, its tool calls and its token usage.

Codex prints one JSON object a line on stdout (codex-rs/exec, ``ThreadEvent``), its warnings on
stderr: ``thread.started`` {thread_id} (the id ``codex exec resume`` takes), ``turn.started``,
``item.started`` / ``item.updated`` / ``item.completed`` {item: {id, type, ...}}, ``turn.completed``
{usage: {input_tokens, cached_input_tokens, cache_write_input_tokens, output_tokens,
reasoning_output_tokens}}, ``turn.failed`` {error: {message}} and ``error`` {message}. An item is an
``agent_message`` {text}, ``reasoning`` {text}, a ``command_execution`` {command, aggregated_output,
exit_code, status}, a ``file_change`` {changes, status}, an ``mcp_tool_call`` {server, tool,
arguments, result, error, status}, a ``web_search`` {query}, a ``todo_list`` or an ``error``
{message} (not fatal: a warning, such as a model it has no metadata for). Item ids (``item_0``, ...)
restart with each process, so nothing here keys on them alone.

Codex runs no hooks, so its tool calls reach the ledger from this output: each finished tool item
becomes an OpenTelemetry GenAI ``execute_tool`` span and each ``turn.completed`` a ``chat`` span with
its tokens, sent with the run's key to the server's OTLP receiver, which records them as it does any
agent's (a ToolInvocation per tool span, a usage row per model span; SPEC §9). Their trace and span
ids are made from the event's id (the run and the log line), so a line read again records nothing
twice. Codex reports no cost, and no times: a call's time is when the runner read its line.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

TYPES = frozenset(
    {
        "thread.started",
        "turn.started",
        "turn.completed",
        "turn.failed",
        "item.started",
        "item.updated",
        "item.completed",
    }
)
USAGE_KEYS = ("input_tokens", "cached_input_tokens", "cache_write_input_tokens", "output_tokens")
TOOL_ITEMS = ("command_execution", "file_change", "mcp_tool_call", "web_search")
TEXT_MAX = 4000
FIELD_MAX = 2000


def _text(value: Any, limit: int = TEXT_MAX) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit] + f"... [{len(text)} chars]"


def _error_message(value: Any) -> str:
    if isinstance(value, dict):
        value = value.get("message", value)
    return _text(value)


def tool_name(item: dict[str, Any]) -> str:
    """The ledger's name for a tool item: its type, or an MCP tool as Claude Code names them."""
    if item.get("type") == "mcp_tool_call":
        return f"mcp__{item.get('server', '')}__{item.get('tool', '')}"
    return str(item.get("type"))


def tool_input(item: dict[str, Any]) -> dict[str, Any]:
    kind = item.get("type")
    if kind == "command_execution":
        return {"command": item.get("command", "")}
    if kind == "file_change":
        return {"changes": item.get("changes") or []}
    if kind == "mcp_tool_call":
        return {"arguments": item.get("arguments")}
    return {"query": item.get("query", "")}


def tool_outcome(item: dict[str, Any]) -> tuple[bool, str, str]:
    """(failed, error, output) of a finished tool item."""
    kind, status = item.get("type"), item.get("status")
    if kind == "command_execution":
        code = item.get("exit_code")
        failed = status in ("failed", "declined") or (isinstance(code, int) and code != 0)
        error = f"exit code {code}" if failed and code is not None else (str(status) if failed else "")
        return failed, error, _text(item.get("aggregated_output", ""), FIELD_MAX)
    if kind == "mcp_tool_call":
        failed = status == "failed" or bool(item.get("error"))
        return failed, _error_message(item.get("error") or "") if failed else "", _text(item.get("result"), FIELD_MAX)
    failed = status == "failed"
    return failed, "failed" if failed else "", ""


def codex_events(line: dict[str, Any], *, provider: str, hooks: bool) -> list[tuple[str, dict[str, Any]]]:
    """(type, payload) stream events for one line of `codex exec --json`."""
    kind = str(line.get("type") or "")
    if kind == "thread.started":
        return [("log", {"source": provider, "event": kind, "thread_id": line.get("thread_id")})]
    if kind == "turn.completed":
        return [("log", {"source": provider, "event": kind, "usage": line.get("usage") or {}})]
    if kind == "turn.failed":  # a top-level "error" line (said just before it) is logship's, as Gemini's
        return [("log", {"source": provider, "event": kind, "message": _error_message(line.get("error"))})]
    if kind not in ("item.started", "item.completed"):
        return []  # turn.started, item.updated: nothing a person needs twice
    item = line.get("item") or {}
    itype = item.get("type")
    if kind == "item.completed" and itype == "agent_message":
        return [("log", {"source": provider, "message": _text(item.get("text", ""))})]
    if kind == "item.completed" and itype == "error":  # not fatal ("Model metadata for `x` not found")
        return [("log", {"source": provider, "event": "warning", "message": _text(item.get("message", ""))})]
    if itype not in TOOL_ITEMS or hooks:
        return []
    payload = {
        "source": provider,
        "tool": tool_name(item),
        "tool_use_id": item.get("id"),
        "input": _text(tool_input(item), FIELD_MAX),
    }
    if kind == "item.started":
        return [("tool_started", payload)]
    failed, error, output = tool_outcome(item)
    payload.update(is_error=failed, status=item.get("status"), output=output)
    if item.get("type") == "command_execution":
        payload["exit_code"] = item.get("exit_code")
    if error:
        payload["error"] = error
    return [("tool_finished", payload)]


# --- tool calls and tokens, as OTLP spans ---------------------------------------------------------------
def _attribute(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": str(value)}}


def _ids(event_id: str) -> tuple[str, str]:
    digest = hashlib.sha256(f"codex-span:{event_id}".encode()).hexdigest()
    return digest[:32], digest[32:48]


def _span(event_id: str, name: str, attributes: dict[str, Any], now_ns: int, error: str = "") -> dict[str, Any]:
    trace_id, span_id = _ids(event_id)
    span = {
        "traceId": trace_id,
        "spanId": span_id,
        "name": name,
        "kind": 1,
        "startTimeUnixNano": str(now_ns),
        "endTimeUnixNano": str(now_ns),
        "attributes": [_attribute(k, v) for k, v in attributes.items()],
    }
    if error:
        span["status"] = {"code": 2, "message": error[:500]}
    return span


def codex_spans(events: list[dict[str, Any]], *, session: str, now_ns: int | None = None) -> list[dict[str, Any]]:
    """The GenAI spans of a slice's stream events: a finished tool call each, and the tokens of each turn.

    A turn's usage is the sum over its model requests. Its ``input_tokens`` count the cached ones and
    the cache writes too (OpenAI's usage); they are stored as Claude Code's are, those apart
    (``cache_read``, ``cache_creation``), so no token is counted twice; ``reasoning_output_tokens``
    are part of ``output_tokens``."""
    now_ns = now_ns or time.time_ns()
    spans = []
    for event in events:
        payload = event.get("payload") or {}
        if event.get("type") == "tool_finished":
            attributes = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": payload.get("tool") or "",
                "gen_ai.tool.call.id": payload.get("tool_use_id") or "",
                "session.id": session,
            }
            name = f"execute_tool {payload.get('tool')}"
            spans.append(_span(event["id"], name, attributes, now_ns, payload.get("error") or ""))
        elif payload.get("event") == "turn.completed":
            usage = payload.get("usage") or {}
            counts = {k: usage.get(k, 0) for k in USAGE_KEYS}
            if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in counts.values()):
                continue
            cached = min(counts["cached_input_tokens"], counts["input_tokens"])
            written = min(counts["cache_write_input_tokens"], counts["input_tokens"] - cached)
            attributes = {
                "gen_ai.operation.name": "chat",
                "gen_ai.system": "openai",
                "gen_ai.usage.input_tokens": counts["input_tokens"] - cached - written,
                "gen_ai.usage.cache_read.input_tokens": cached,
                "gen_ai.usage.cache_creation.input_tokens": written,
                "gen_ai.usage.output_tokens": counts["output_tokens"],
                "session.id": session,
            }
            spans.append(_span(event["id"], "chat", attributes, now_ns))
    return spans


def otlp_traces(spans: list[dict[str, Any]], *, provider: str) -> dict[str, Any]:
    """An OTLP/JSON ExportTraceServiceRequest holding ``spans``."""
    resource = {"attributes": [_attribute("service.name", provider)]}
    scope = {"scope": {"name": "switchyard-runner"}, "spans": spans}
    return {"resourceSpans": [{"resource": resource, "scopeSpans": [scope]}]}
