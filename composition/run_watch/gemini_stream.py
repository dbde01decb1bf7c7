"""Gemini CLI's ``--output-format stream-json`` output as a conversation.

One JSON object a line: ``init`` (session id, model), ``message`` (the user's prompt, then the
assistant's words in pieces as the model streams them, ``delta``: true), ``tool_use`` (``tool_name``,
``tool_id``, ``parameters``) and ``tool_result`` (``tool_id``, ``status`` success or error,
``output``, ``error`` {type, message}), ``error`` (``severity``, ``message``), and a last ``result``
(``status``, ``error`` when it failed, ``stats`` with the tokens). A resumed attempt appends its own
lines, ``init`` to ``result``, so its tokens are added. Written against Gemini CLI 0.61.0
(tests/run_watch/fixtures/gemini_stream.jsonl is its real output); Gemini prints no cost.
"""

from __future__ import annotations

from composition.run_watch.items import Conversation, Notice, Text, ToolCall, as_text, json_lines


def _count(stats: dict, key: str) -> int:
    value = stats.get(key)
    return value if isinstance(value, int) and value > 0 else 0


def parse(data: bytes) -> Conversation:
    conversation = Conversation()
    calls: dict[str, ToolCall] = {}
    words: list[str] = []  # the assistant's pieces since the last other line, said as one text

    def said() -> None:
        text = "".join(words)
        words.clear()
        if text.strip():
            conversation.items.append(Text(markdown=text))

    for line in json_lines(data):
        kind = line.get("type")
        if kind == "message":
            if line.get("role") == "assistant" and isinstance(line.get("content"), str):
                words.append(line["content"])
            continue
        said()
        if kind == "init" and isinstance(line.get("model"), str):
            conversation.model = line["model"]
        elif kind == "tool_use":
            call = ToolCall(id=str(line.get("tool_id") or ""), name=str(line.get("tool_name") or "tool"))
            call.input = line.get("parameters")
            calls[call.id] = call
            conversation.items.append(call)
        elif kind == "tool_result":
            call = calls.get(str(line.get("tool_id") or ""))
            if call is None:
                continue
            error = line.get("error") if isinstance(line.get("error"), dict) else {}
            call.is_error = line.get("status") != "success"
            call.output = as_text(
                error.get("message") if call.is_error and error.get("message") else line.get("output") or ""
            )
        elif kind == "error" and line.get("severity") == "error" and line.get("message"):
            conversation.items.append(Notice(text=str(line["message"])))
        elif kind == "result":
            error = line.get("error") if isinstance(line.get("error"), dict) else {}
            if line.get("status") == "error":
                conversation.items.append(
                    Notice(text=str(error.get("message") or "The Gemini CLI ended with an error."))
                )
            stats = line.get("stats") if isinstance(line.get("stats"), dict) else {}
            cached = _count(stats, "cached")
            # Gemini counts the cached tokens inside input_tokens; here they are apart, as Claude's.
            conversation.input_tokens += max(0, _count(stats, "input_tokens") - cached)
            conversation.cache_read_tokens += cached
            conversation.output_tokens += _count(stats, "output_tokens")
    said()
    return conversation
