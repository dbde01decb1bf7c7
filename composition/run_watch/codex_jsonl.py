"""Codex CLI's ``codex exec --json`` output as a conversation.

One JSON object a line: ``thread.started``, ``turn.started``, ``item.started`` / ``item.updated`` /
``item.completed`` with an ``item`` (``agent_message``, ``reasoning``, ``command_execution``,
``file_change``, ``mcp_tool_call``, ``web_search``, ``todo_list``, ``error``) keyed by its ``id``,
``turn.completed`` with the turn's ``usage`` (``input_tokens``, ``cached_input_tokens``,
``cache_write_input_tokens``, ``output_tokens``), ``turn.failed`` and ``error``. As documented
(codex-rs/exec/src/exec_events.rs) and checked against Codex CLI 0.171.0; Codex prints no cost.

A run's log holds one process per attempt (a resumed run: ``codex exec resume``), each starting with
``thread.started``, and item ids (``item_0``, ...) start again with each: an id means the same item
only within its process. An API error is said twice, as ``error`` and as ``turn.failed``: shown once.
"""

from __future__ import annotations

from composition.run_watch.items import Conversation, Notice, Plan, Step, Text, ToolCall, as_text, json_lines

TOOL_ITEMS = ("command_execution", "file_change", "mcp_tool_call", "web_search")


def _tool(item: dict) -> ToolCall:
    itype = str(item.get("type"))
    item_id = str(item.get("id") or "")
    status = str(item.get("status") or "")
    done = status in ("completed", "failed", "declined") or "exit_code" in item and item["exit_code"] is not None
    if itype == "command_execution":
        output = item.get("aggregated_output")
        exit_code = item.get("exit_code")
        failed = status == "failed" or (isinstance(exit_code, int) and exit_code != 0)
        return ToolCall(
            id=item_id,
            name="shell",
            input={"command": item.get("command", "")},
            output=(as_text(output or "") + (f"\n(exit {exit_code})" if failed and exit_code is not None else ""))
            if done
            else None,
            is_error=failed,
        )
    if itype == "file_change":
        changes = [c for c in item.get("changes") or () if isinstance(c, dict)]
        lines = [f"{c.get('kind', 'update')} {c.get('path', '')}" for c in changes]
        first = changes[0].get("path", "") if changes else ""
        return ToolCall(
            id=item_id,
            name="edit files",
            input={"path": str(first), "changes": changes},
            output="\n".join(lines) if done else None,
            is_error=status == "failed",
        )
    if itype == "mcp_tool_call":
        error = item.get("error")
        output = (
            as_text(error.get("message") if isinstance(error, dict) else error)
            if error
            else _mcp_result(item.get("result"))
        )
        return ToolCall(
            id=item_id,
            name=f"{item.get('server', 'mcp')}.{item.get('tool', 'tool')}",
            input=item.get("arguments"),
            output=output if done else None,
            is_error=bool(error) or status == "failed",
        )
    return ToolCall(id=item_id, name="web search", input={"query": item.get("query", "")}, output="" if done else None)


def _mcp_result(result: object) -> str:
    """An MCP result's text blocks (``{"content": [{"type": "text", ...}]}``), else the result as JSON."""
    content = result.get("content") if isinstance(result, dict) else None
    if isinstance(content, list) and all(isinstance(block, dict) for block in content):
        return as_text("\n".join(str(block.get("text", "")) for block in content if block.get("type") == "text"))
    return as_text(result)


def _plan(item: dict) -> Plan:
    steps = [
        Step(text=str(entry.get("text", "")), status="completed" if entry.get("completed") else "pending")
        for entry in item.get("items") or ()
        if isinstance(entry, dict)
    ]
    return Plan(steps=steps)


def parse(data: bytes) -> Conversation:
    conversation = Conversation()
    placed: dict[str, int] = {}  # item id -> its index in conversation.items, replaced as it updates
    for line in json_lines(data):
        kind = line.get("type")
        if kind == "thread.started":
            placed = {}  # a new process: its item ids are its own
        elif kind in ("item.started", "item.updated", "item.completed"):
            item = line.get("item") if isinstance(line.get("item"), dict) else {}
            itype = item.get("type")
            if itype == "agent_message" and kind == "item.completed" and str(item.get("text") or "").strip():
                built = Text(markdown=str(item["text"]))
            elif itype in TOOL_ITEMS:
                built = _tool(item)
            elif itype == "todo_list":
                built = _plan(item)
            elif itype == "error" and item.get("message"):
                built = Notice(text=str(item["message"]))
            else:
                continue  # reasoning: the model's notes to itself, not its conversation
            key = str(item.get("id") or f"line{len(conversation.items)}")
            if key in placed:
                conversation.items[placed[key]] = built
            else:
                placed[key] = len(conversation.items)
                conversation.items.append(built)
        elif kind == "turn.completed" and isinstance(line.get("usage"), dict):
            usage = line["usage"]
            cached = int(usage.get("cached_input_tokens") or 0)
            written = int(usage.get("cache_write_input_tokens") or 0)
            # Codex counts the cached and cache-write tokens inside input_tokens; here they are apart, as Claude's.
            conversation.input_tokens += max(0, int(usage.get("input_tokens") or 0) - cached - written)
            conversation.cache_read_tokens += cached
            conversation.cache_creation_tokens += written
            conversation.output_tokens += int(usage.get("output_tokens") or 0)
        elif kind == "turn.failed":
            error = line.get("error")
            message = error.get("message") if isinstance(error, dict) else error
            _notice(conversation, str(message or "The turn failed."))
        elif kind == "error" and line.get("message"):
            _notice(conversation, str(line["message"]))
    return conversation


def _notice(conversation: Conversation, text: str) -> None:
    last = conversation.items[-1] if conversation.items else None
    if not (isinstance(last, Notice) and last.text == text):
        conversation.items.append(Notice(text=text))
