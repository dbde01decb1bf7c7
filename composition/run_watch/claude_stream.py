"""Claude Code's ``--output-format stream-json --verbose`` output as a conversation.

One JSON object a line: ``system``/``init`` (the model), ``assistant`` (a message's content blocks,
one block a line: ``text``, ``tool_use``, ``thinking``), ``user`` (``tool_result`` blocks answering
the tool uses by ``tool_use_id``), and a last ``result`` line (``total_cost_usd``, ``usage``,
``is_error``). Each ``assistant`` line repeats its message's ``usage``: it is counted once per
message id. Written against Claude Code 2.1.x (tests/run_watch/fixtures/claude_stream.jsonl is its
real output).
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from composition.run_watch.items import Conversation, Notice, Plan, Question, Step, Text, ToolCall, as_text, json_lines

TODO_TOOL = "TodoWrite"
ASK_TOOL = "AskUserQuestion"


def _result_text(content: object) -> str:
    """A tool_result's content: a string, or a list of blocks of which the text ones are read."""
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text":
                parts.append(str(block.get("text", "")))
            elif isinstance(block, dict) and block.get("type") == "image":
                parts.append("[an image]")  # never shown: agent-supplied images stay out of pages
        return "\n".join(parts)
    return as_text(content)


def _plan(todos: object) -> Plan | None:
    if not isinstance(todos, list):
        return None
    steps = [
        Step(text=str(todo.get("content") or todo.get("activeForm") or ""), status=str(todo.get("status") or "pending"))
        for todo in todos
        if isinstance(todo, dict)
    ]
    return Plan(steps=steps) if steps else None


def _question(data: object) -> Question | None:
    questions = data.get("questions") if isinstance(data, dict) else None
    if not isinstance(questions, list):
        return None
    lines = []
    for entry in questions:
        if isinstance(entry, dict) and entry.get("question"):
            options = [
                str(o.get("label")) for o in entry.get("options") or () if isinstance(o, dict) and o.get("label")
            ]
            lines.append(str(entry["question"]) + (f" ({' / '.join(options)})" if options else ""))
    return Question(text="\n".join(lines)) if lines else None


def _decimal(value: object) -> Decimal | None:
    try:
        return Decimal(str(value)) if isinstance(value, (int, float, str)) and value != "" else None
    except InvalidOperation:
        return None


def _set_usage(conversation: Conversation, usage: dict) -> None:
    conversation.input_tokens = int(usage.get("input_tokens") or 0)
    conversation.output_tokens = int(usage.get("output_tokens") or 0)
    conversation.cache_read_tokens = int(usage.get("cache_read_input_tokens") or 0)
    conversation.cache_creation_tokens = int(usage.get("cache_creation_input_tokens") or 0)


def parse(data: bytes) -> Conversation:
    conversation = Conversation()
    calls: dict[str, ToolCall] = {}
    usage_by_message: dict[str, dict] = {}
    final_usage = None
    for line in json_lines(data):
        kind = line.get("type")
        if kind == "system" and line.get("subtype") == "init":
            conversation.model = str(line.get("model") or "")
        elif kind == "assistant":
            message = line.get("message") if isinstance(line.get("message"), dict) else {}
            if isinstance(message.get("usage"), dict):
                usage_by_message[str(message.get("id") or len(usage_by_message))] = message["usage"]
            for block in message.get("content") or ():
                _assistant_block(conversation, calls, block)
        elif kind == "user":
            message = line.get("message") if isinstance(line.get("message"), dict) else {}
            content = message.get("content")
            for block in content if isinstance(content, list) else ():
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    call = calls.get(str(block.get("tool_use_id")))
                    if call is not None:
                        call.output = _result_text(block.get("content"))
                        call.is_error = bool(block.get("is_error"))
        elif kind == "result":
            conversation.cost_usd = _decimal(line.get("total_cost_usd"))
            final_usage = line.get("usage") if isinstance(line.get("usage"), dict) else None
            if line.get("is_error") or str(line.get("subtype") or "success") != "success":
                said = line.get("result") if isinstance(line.get("result"), str) else ""
                conversation.items.append(Notice(text=said or f"Claude Code ended: {line.get('subtype')}"))
    if final_usage is not None:
        _set_usage(conversation, final_usage)
    else:  # still running: the sum of the messages so far
        total: dict[str, int] = {}
        for usage in usage_by_message.values():
            for key, value in usage.items():
                if isinstance(value, int):
                    total[key] = total.get(key, 0) + value
        _set_usage(conversation, total)
    return conversation


def _assistant_block(conversation: Conversation, calls: dict[str, ToolCall], block: object) -> None:
    if not isinstance(block, dict):
        return
    btype = block.get("type")
    if btype == "text" and str(block.get("text") or "").strip():
        conversation.items.append(Text(markdown=str(block["text"])))
    elif btype == "tool_use":
        name, data = str(block.get("name") or "tool"), block.get("input")
        special = _plan(data.get("todos")) if name == TODO_TOOL and isinstance(data, dict) else None
        special = special or (_question(data) if name == ASK_TOOL else None)
        if special is not None:
            conversation.items.append(special)
        call = ToolCall(id=str(block.get("id") or ""), name=name, input=data)
        calls[call.id] = call
        if special is None:
            conversation.items.append(call)
