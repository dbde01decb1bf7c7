"""Codex CLI's `codex exec --json` output turned into a run's events, tool calls and tokens
(runner/codex_output.py), on lines as Codex 0.171.0 printed them against the Responses API stand-in
(tests/runners/test_runner_codex_e2e.py runs the CLI itself)."""

import json

from switchyard_client.runner.codex_output import codex_spans, otlp_traces
from switchyard_client.runner.logship import agent_error_in, agent_session_in, parse_slice

THREAD = "01a221d9-22b2-7823-a16b-da1ad43333cb"
COMMAND = "/bin/bash -lc 'echo hi > a.txt && git add a.txt && git commit -qm a && echo committed'"
WORKED = [
    {"type": "thread.started", "thread_id": THREAD},
    {
        "type": "item.completed",
        "item": {
            "id": "item_0",
            "type": "error",
            "message": "Model metadata for `gpt-standin` not found. Defaulting to fallback metadata; this can "
            "degrade performance and cause issues.",
        },
    },
    {"type": "turn.started"},
    {
        "type": "item.started",
        "item": {
            "id": "item_1",
            "type": "command_execution",
            "command": COMMAND,
            "aggregated_output": "",
            "exit_code": None,
            "status": "in_progress",
        },
    },
    {
        "type": "item.completed",
        "item": {
            "id": "item_1",
            "type": "command_execution",
            "command": COMMAND,
            "aggregated_output": "committed\n",
            "exit_code": 0,
            "status": "completed",
        },
    },
    {"type": "item.completed", "item": {"id": "item_2", "type": "agent_message", "text": "Done."}},
    {
        "type": "turn.completed",
        "usage": {
            "input_tokens": 2400,
            "cached_input_tokens": 400,
            "cache_write_input_tokens": 0,
            "output_tokens": 160,
            "reasoning_output_tokens": 0,
        },
    },
]
FAILED_401 = (
    "unexpected status 401 Unauthorized: Incorrect API key provided., url: http://127.0.0.1:46063/v1/responses, "
    "request id: req_0001"
)
FAILED = [
    WORKED[0],
    WORKED[1],
    {"type": "turn.started"},
    {"type": "error", "message": FAILED_401},
    {"type": "turn.failed", "error": {"message": FAILED_401}},
]


def _stream(lines) -> bytes:
    # Codex's warnings go to stderr, which the runner's log holds too: lines that are not JSON.
    noise = (
        b"WARNING: proceeding, even though we could not create PATH aliases\nReading additional input from stdin...\n"
    )
    return noise + b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def _attributes(span) -> dict:
    return {a["key"]: next(iter(a["value"].values())) for a in span["attributes"]}


def test_a_worked_turn_becomes_events_a_tool_call_and_its_tokens():
    got = parse_slice(_stream(WORKED), start_line=0, provider="codex", hooks=False, run_id=7, session="s1")

    assert got.lines == 9 and got.used == len(_stream(WORKED))
    kinds = [(e["type"], e["payload"].get("event") or e["payload"].get("tool")) for e in got.events]
    assert kinds == [
        ("log", "thread.started"),
        ("log", "warning"),
        ("tool_started", "command_execution"),
        ("tool_finished", "command_execution"),
        ("log", None),
        ("log", "turn.completed"),
    ]
    assert agent_session_in(got.events) == THREAD
    finished = got.events[3]["payload"]
    assert finished["exit_code"] == 0 and finished["is_error"] is False and finished["output"] == "committed\n"
    assert json.loads(finished["input"]) == {"command": COMMAND}
    assert got.events[4]["payload"]["message"] == "Done."
    assert agent_error_in(got.events) == ""  # a warning is no failure

    tool, chat = got.spans
    assert _attributes(tool) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "command_execution",
        "gen_ai.tool.call.id": "item_1",
        "session.id": "s1",
    }
    assert "status" not in tool
    assert _attributes(chat) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.system": "openai",
        "gen_ai.usage.input_tokens": "2000",  # 2,400 less the 400 cached
        "gen_ai.usage.cache_read.input_tokens": "400",
        "gen_ai.usage.cache_creation.input_tokens": "0",
        "gen_ai.usage.output_tokens": "160",
        "session.id": "s1",
    }
    # Read again (a runner restarted before it saved how far it got): the same span ids.
    again = parse_slice(_stream(WORKED), start_line=0, provider="codex", hooks=False, run_id=7, session="s1")
    assert [(s["traceId"], s["spanId"]) for s in again.spans] == [(s["traceId"], s["spanId"]) for s in got.spans]
    other = parse_slice(_stream(WORKED), start_line=9, provider="codex", hooks=False, run_id=7, session="s1")
    assert {s["spanId"] for s in other.spans}.isdisjoint({s["spanId"] for s in got.spans})  # later lines, new ids
    export = otlp_traces(got.spans, provider="codex")
    assert export["resourceSpans"][0]["scopeSpans"][0]["spans"] == got.spans


def test_a_failed_command_is_a_failed_call():
    item = {**WORKED[4]["item"], "aggregated_output": "fatal: no\n", "exit_code": 128, "status": "failed"}
    got = parse_slice(
        _stream([{"type": "item.completed", "item": item}]), start_line=0, provider="codex", hooks=False, run_id=1
    )
    (event,) = got.events
    assert event["payload"]["is_error"] is True and event["payload"]["error"] == "exit code 128"
    (span,) = got.spans
    assert span["status"] == {"code": 2, "message": "exit code 128"}


def test_an_api_error_is_the_agents_error():
    got = parse_slice(_stream(FAILED), start_line=0, provider="codex", hooks=False, run_id=1)
    assert agent_error_in(got.events) == FAILED_401
    assert not got.spans  # no tool ran, no tokens were reported


def test_usage_that_is_not_counts_records_no_tokens():
    bad = {"type": "turn.completed", "usage": {"input_tokens": -1, "cached_input_tokens": 0, "output_tokens": 3}}
    assert codex_spans([{"id": "x", "type": "log", "payload": {"event": "turn.completed", **bad}}], session="s") == []
