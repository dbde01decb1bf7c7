"""The provider parsers on real output: fixtures/claude_stream.jsonl is the real Claude Code CLI's
stream-json (capture_claude_stream.py), fixtures/codex_exec.jsonl Codex's `exec --json` as documented."""

import json
from decimal import Decimal
from pathlib import Path

from composition.run_watch import claude_stream, codex_jsonl
from composition.run_watch.conversation import log_format

FIXTURES = Path(__file__).parent / "fixtures"
CLAUDE = (FIXTURES / "claude_stream.jsonl").read_bytes()
CODEX = (FIXTURES / "codex_exec.jsonl").read_bytes()


def _kinds(conversation):
    return [item.kind for item in conversation.items]


def test_claude_stream_json_reads_as_text_and_tool_calls_with_their_results():
    conversation = claude_stream.parse(CLAUDE)

    assert _kinds(conversation) == ["text", "tool", "tool", "tool", "text"]
    first, ls, write, missing, last = conversation.items
    assert first.markdown == "I'll look at the workdir first."
    assert (ls.name, ls.headline, ls.output, ls.status) == ("Bash", "ls", "README.md", "done")
    assert '"description": "look around"' in ls.input_text
    assert write.name == "Write" and write.headline.endswith("/work/notes.txt")
    assert write.output.startswith("File created successfully")
    assert missing.status == "error" and "No such file or directory" in missing.output
    assert last.markdown.startswith("Done: **notes.txt** is written.")
    assert conversation.model.startswith("claude-")


def test_claude_stream_json_takes_cost_and_usage_from_its_result_line():
    conversation = claude_stream.parse(CLAUDE)

    assert conversation.cost_usd == Decimal("0.00432")
    assert (conversation.input_tokens, conversation.output_tokens) == (480, 120)


def test_claude_stream_json_while_running_counts_each_message_once():
    """Before the result line, the messages' usage: a message split over two lines (text, then its
    tool use) repeats its usage, counted once; a tool still running has no output yet."""
    lines = CLAUDE.splitlines(keepends=True)
    running = b"".join(lines[:3])  # init, the text block and the tool_use block of message 1

    conversation = claude_stream.parse(running)

    assert _kinds(conversation) == ["text", "tool"]
    assert conversation.items[1].status == "running" and conversation.items[1].output is None
    assert (conversation.input_tokens, conversation.output_tokens) == (120, 1)
    assert conversation.cost_usd is None


def test_claude_todos_are_a_plan_and_its_questions_are_questions():
    log = (
        b'{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t1","name":"TodoWrite",'
        b'"input":{"todos":[{"content":"Read","status":"completed"},{"content":"Write","status":"in_progress"}]}}]}}\n'
        b'{"type":"assistant","message":{"id":"m2","content":[{"type":"tool_use","id":"t2","name":"AskUserQuestion",'
        b'"input":{"questions":[{"question":"Which colour?","options":[{"label":"Red"},{"label":"Blue"}]}]}}]}}\n'
    )
    plan, question = claude_stream.parse(log).items

    assert [(s.text, s.status) for s in plan.steps] == [("Read", "completed"), ("Write", "in_progress")]
    assert question.text == "Which colour? (Red / Blue)"


def test_codex_jsonl_reads_messages_commands_file_changes_plans_and_mcp_calls():
    conversation = codex_jsonl.parse(CODEX)

    assert _kinds(conversation) == ["tool", "plan", "tool", "tool", "tool", "text"]
    ls, plan, change, missing, mcp, text = conversation.items
    assert (ls.name, ls.headline, ls.output, ls.status) == ("shell", "bash -lc ls", "README.md\nsrc\n", "done")
    # The todo list was updated in place: both steps done.
    assert [(s.text, s.status) for s in plan.steps] == [
        ("Read the code", "completed"),
        ("Write notes.txt", "completed"),
    ]
    assert change.headline == "notes.txt" and change.output == "add notes.txt"
    assert missing.status == "error" and "(exit 1)" in missing.output
    assert mcp.name == "switchyard.event_append" and mcp.output == "ok"
    assert text.markdown.startswith("Wrote **notes.txt**.")
    # Reasoning is left out; usage: cached tokens apart from the rest, no cost (Codex says none).
    assert (conversation.input_tokens, conversation.cache_read_tokens, conversation.output_tokens) == (315, 24448, 122)
    assert conversation.cost_usd is None


def test_a_codex_command_still_running_has_no_output_and_failures_are_notices():
    lines = CODEX.splitlines(keepends=True)
    conversation = codex_jsonl.parse(b"".join(lines[:4]) + b'{"type":"turn.failed","error":{"message":"quota"}}\n')

    assert conversation.items[0].status == "running"
    assert conversation.items[-1].kind == "notice" and conversation.items[-1].text == "quota"


def test_the_format_is_read_from_the_lines_and_a_cut_first_line_is_skipped():
    assert log_format(CLAUDE) == "claude"
    assert log_format(CODEX) == "codex"
    assert log_format(b"[demo-agent] starting on task #3\n") == "text"
    # A log read from its middle starts with part of a line: skipped, the rest parsed.
    cut = CLAUDE[CLAUDE.index(b"\n") - 20 :]
    assert log_format(cut) == "claude"
    assert _kinds(claude_stream.parse(cut)) == ["text", "tool", "tool", "tool", "text"]


def _codex_process(thread: str, command: str, output: str, said: str) -> list[dict]:
    """What one `codex exec --json` process printed (Codex 0.171.0: its item ids start at item_0)."""
    item = {"id": "item_1", "type": "command_execution", "command": command, "aggregated_output": ""}
    return [
        {"type": "thread.started", "thread_id": thread},
        {"type": "turn.started"},
        {"type": "item.started", "item": {**item, "exit_code": None, "status": "in_progress"}},
        {
            "type": "item.completed",
            "item": {**item, "aggregated_output": output, "exit_code": 0, "status": "completed"},
        },
        {"type": "item.completed", "item": {"id": "item_2", "type": "agent_message", "text": said}},
        {
            "type": "turn.completed",
            "usage": {
                "input_tokens": 2400,
                "cached_input_tokens": 400,
                "cache_write_input_tokens": 100,
                "output_tokens": 160,
                "reasoning_output_tokens": 0,
            },
        },
    ]


def test_a_resumed_codex_run_keeps_both_processes_items_though_their_ids_repeat():
    lines = _codex_process("th-1", "echo one > one.txt", "", "One.")[:4] + _codex_process(
        "th-1", "git commit -qm one", "committed\n", "Committed."
    )
    conversation = codex_jsonl.parse(b"".join(json.dumps(line).encode() + b"\n" for line in lines))

    first, second, text = conversation.items
    assert (first.headline, first.status) == ("echo one > one.txt", "done")
    assert (second.headline, second.output) == ("git commit -qm one", "committed\n")
    assert text.markdown == "Committed."
    # 2,400 input tokens, of which 400 cached and 100 written to the cache: apart, as Claude Code's.
    assert (conversation.input_tokens, conversation.cache_read_tokens, conversation.cache_creation_tokens) == (
        1900,
        400,
        100,
    )


def test_a_codex_api_error_said_twice_is_one_notice():
    said = "unexpected status 401 Unauthorized: Incorrect API key provided."
    lines = [
        {"type": "thread.started", "thread_id": "th-1"},
        {"type": "turn.started"},
        {"type": "error", "message": said},
        {"type": "turn.failed", "error": {"message": said}},
    ]
    conversation = codex_jsonl.parse(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
    assert [(item.kind, item.text) for item in conversation.items] == [("notice", said)]
