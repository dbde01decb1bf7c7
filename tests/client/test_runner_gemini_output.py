"""Gemini CLI's stream-json, as the runner reads it (runner/gemini_output.py, logship.py).

The lines are Gemini CLI 0.61.0's own, printed against the scripted API stand-in
(tests/runners/fake_gemini_api.py) and copied here whole: a run with a shell call, and a run the API
refused. tests/runners/test_runner_gemini_e2e.py runs the CLI itself under a runner.
"""

import json

from switchyard_client.runner import gemini_output
from switchyard_client.runner.logship import agent_error_in, agent_session_in, parse_lines

SUCCESS = b"""\
{"type":"init","timestamp":"2026-11-28T11:08:03.900Z","session_id":"f7161d4a-b829-4784-8d0d-6092b0a8af6a","model":"gemini-2.5-pro"}
{"type":"message","timestamp":"2026-11-28T11:08:03.903Z","role":"user","content":"one"}
{"type":"tool_use","timestamp":"2026-11-28T11:08:04.110Z","tool_name":"run_shell_command","tool_id":"run_shell_command__fake_00","parameters":{"command":"echo one > one.txt"}}
{"type":"tool_result","timestamp":"2026-11-28T11:08:04.356Z","tool_id":"run_shell_command__fake_00","status":"success","output":""}
{"type":"message","timestamp":"2026-11-28T11:08:04.436Z","role":"assistant","content":"One.","delta":true}
{"type":"result","timestamp":"2026-11-28T11:08:04.459Z","status":"success","stats":{"total_tokens":300,"input_tokens":240,"output_tokens":60,"cached":0,"input":240,"duration_ms":560,"tool_calls":1,"models":{"gemini-2.5-pro":{"total_tokens":300,"input_tokens":240,"output_tokens":60,"cached":0,"input":240}}}}
"""
REFUSED = b"""\
Warning: 256-color support not detected. Using a terminal with at least 256-color support is recommended for a better visual experience.
{"type":"init","timestamp":"2026-11-28T11:09:43.685Z","session_id":"7a2d608e-5fe1-4d4d-9009-f1c9c6daf6df","model":"gemini-2.5-pro"}
{"type":"message","timestamp":"2026-11-28T11:09:43.691Z","role":"user","content":"Write hi"}
{"type":"result","timestamp":"2026-11-28T11:09:43.824Z","status":"error","error":{"type":"unknown","message":"[API Error: {\\"error\\":{\\"code\\":401,\\"message\\":\\"the stand-in refuses with 401\\",\\"status\\":\\"UNAUTHENTICATED\\"}}]"},"stats":{"total_tokens":0,"input_tokens":0,"output_tokens":0,"cached":0,"input":0,"duration_ms":0,"tool_calls":0,"models":{"gemini-2.5-pro":{"total_tokens":0,"input_tokens":0,"output_tokens":0,"cached":0,"input":0}}}}
Error when talking to Gemini API Full report available at: /tmp/gemini-client-error-Turn.run-sendMessageStream-2026-11-28T11-09-43-809Z.json _ApiError: {"error":{"code":401,"message":"the stand-in refuses with 401","status":"UNAUTHENTICATED"}}
"""


def test_a_run_becomes_its_init_words_tool_calls_and_result():
    events, used, lines = parse_lines(SUCCESS, start_line=0, provider="gemini", hooks=False, run_id=4)

    assert used == len(SUCCESS) and lines == 6
    assert [(e["id"], e["type"]) for e in events] == [
        ("run4-l1-0", "log"),
        ("run4-l3-0", "tool_started"),
        ("run4-l4-0", "tool_finished"),
        ("run4-l5-0", "log"),
        ("run4-l6-0", "log"),
    ]  # the user's own prompt (line 2) is not said back
    init, started, finished, words, result = (e["payload"] for e in events)
    assert init == {
        "source": "gemini",
        "event": "init",
        "session_id": "f7161d4a-b829-4784-8d0d-6092b0a8af6a",
        "model": "gemini-2.5-pro",
    }
    assert started == {
        "source": "gemini",
        "tool_use_id": "run_shell_command__fake_00",
        "tool": "run_shell_command",
        "input": '{"command": "echo one > one.txt"}',
    }
    assert finished == {
        "source": "gemini",
        "tool_use_id": "run_shell_command__fake_00",
        "is_error": False,
        "output": "",
    }
    assert words == {"source": "gemini", "message": "One."}
    assert result["event"] == "result" and result["status"] == "success" and "error" not in result
    assert result["stats"]["input_tokens"] == 240 and result["stats"]["models"]["gemini-2.5-pro"]["output_tokens"] == 60
    assert agent_session_in(events) == "f7161d4a-b829-4784-8d0d-6092b0a8af6a"
    assert agent_error_in(events) == ""


def test_with_hooks_no_tool_call_is_taken_from_the_output():
    events, _, _ = parse_lines(SUCCESS, start_line=0, provider="gemini", hooks=True, run_id=4)
    assert not [e for e in events if e["type"].startswith("tool_")]


def test_the_tool_calls_go_to_the_ledger_started_then_finished_under_the_clis_ids():
    starts, finishes = gemini_output.tool_calls_in(SUCCESS)

    assert starts == [
        {
            "id": "run_shell_command__fake_00",
            "tool_name": "run_shell_command",
            "input": {"command": "echo one > one.txt"},
            "started_at": "2026-11-28T11:08:04.110Z",
        }
    ]
    assert finishes == [
        {
            "id": "run_shell_command__fake_00",
            "status": "success",
            "output": "",
            "finished_at": "2026-11-28T11:08:04.356Z",
        }
    ]


def test_a_failed_tool_is_a_failure_with_its_error():
    line = {
        "type": "tool_result",
        "timestamp": "2026-11-28T11:08:04.356Z",
        "tool_id": "read_file__x",
        "status": "error",
        "output": "",
        "error": {"type": "FILE_NOT_FOUND", "message": "File not found: /nope"},
    }
    (finish,) = gemini_output.tool_calls_in(json.dumps(line).encode())[1]
    assert finish["status"] == "failure" and finish["error"] == "File not found: /nope"
    ((kind, payload),) = gemini_output.events_from_line(line, provider="gemini", hooks=False)
    assert kind == "tool_finished" and payload["is_error"] is True and "File not found" in payload["error"]


def test_a_refused_run_says_the_clis_message_and_its_text_lines_are_skipped():
    events, used, lines = parse_lines(REFUSED, start_line=0, provider="gemini", hooks=False, run_id=5)

    assert used == len(REFUSED) and lines == 5
    (result,) = [e["payload"] for e in events if e["payload"].get("event") == "result"]
    assert result["status"] == "error"
    assert result["error"].startswith("[API Error: ") and "the stand-in refuses with 401" in result["error"]
    assert agent_error_in(events) == result["error"]


def test_other_providers_lines_are_not_taken_for_geminis():
    claude_result = {"type": "result", "subtype": "success", "is_error": False, "result": "ok", "total_cost_usd": 0.1}
    codex_error = {"type": "error", "message": "stream disconnected"}
    claude_init = {"type": "system", "subtype": "init", "session_id": "u-1"}
    for line in (claude_result, codex_error, claude_init):
        assert not gemini_output.is_gemini(line), line
    assert gemini_output.is_gemini({"type": "error", "severity": "warning", "message": "Loop detected"})
