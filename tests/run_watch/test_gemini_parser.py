"""Gemini CLI's stream-json as a conversation (composition/run_watch/gemini_stream.py), on its real
output: fixtures/gemini_stream.jsonl is Gemini CLI 0.61.0's stdout against the scripted Gemini API
(capture_gemini_stream.py; its temporary folder's path written as /tmp/gemini-capture)."""

from pathlib import Path

from composition.run_watch import gemini_stream
from composition.run_watch.conversation import log_format

GEMINI = (Path(__file__).parent / "fixtures" / "gemini_stream.jsonl").read_bytes()


def test_gemini_stream_json_reads_as_words_and_tool_calls_with_their_results():
    conversation = gemini_stream.parse(GEMINI)

    assert [item.kind for item in conversation.items] == ["text", "tool", "tool", "tool", "text"]
    first, shell, read, write, last = conversation.items
    assert first.markdown == "Let me look first."  # two streamed pieces, said as one
    assert (shell.name, shell.headline, shell.output, shell.status) == (
        "run_shell_command",
        "echo hello",
        "hello",
        "done",
    )
    assert read.name == "read_file" and read.status == "error"
    assert read.output == "File not found: /tmp/gemini-capture/work/missing.txt"
    assert write.headline == "/tmp/gemini-capture/work/notes.md" and write.status == "done"
    assert last.markdown == "Done: the notes are written, and the file that was missing stays missing."
    assert conversation.model == "gemini-2.5-pro"


def test_gemini_tokens_come_from_its_result_and_no_cost():
    conversation = gemini_stream.parse(GEMINI)

    assert (conversation.input_tokens, conversation.output_tokens, conversation.cache_read_tokens) == (480, 120, 0)
    assert conversation.cost_usd is None


def test_a_gemini_call_still_running_has_no_output_and_a_failed_end_is_a_notice():
    lines = GEMINI.splitlines(keepends=True)
    refused = (
        b'{"type":"result","status":"error","error":{"type":"unknown","message":"[API Error: quota]"},'
        b'"stats":{"input_tokens":0,"output_tokens":0,"cached":0}}\n'
    )

    conversation = gemini_stream.parse(b"".join(lines[:5]) + refused)

    call = conversation.items[1]
    assert call.status == "running" and call.output is None
    assert conversation.items[-1].kind == "notice" and conversation.items[-1].text == "[API Error: quota]"


def test_a_gemini_log_is_told_apart_from_a_cut_first_line_on():
    assert log_format(GEMINI) == "gemini"
    cut = GEMINI[GEMINI.index(b"\n") - 20 :]
    assert log_format(cut) == "gemini"
    assert log_format(b"Warning: 256-color support not detected.\n" + GEMINI) == "gemini"
