"""A stand-in for Claude Code in a run whose hook defers a tool call (bench/runner_bench.py, part
waiting): what the runner and the server see of it, without the CLI's own start-up (measured beside it
with the real CLI by tests/runners/test_runner_claude_deferred.py).

First start: records the question as `switchyard hook` does (an Allow / Deny input_request, the session
waiting for input), then prints Claude Code's result line for a deferred call (``stop_reason``
``tool_deferred``, ``deferred_tool_use``) and exits 0. Resumed with the person's answer in
SWITCHYARD_DEFERRED: prints ``<time.time()> tool <decision>`` (the tool "executed") and a plain result.
"""

import datetime as dt
import json
import os
import sys
import time

import httpx

answer = os.environ.get("SWITCHYARD_DEFERRED")
if answer:
    print(f"{time.time():.6f} tool {json.loads(answer)['decision']}", flush=True)
    print(json.dumps({"type": "result", "subtype": "success", "result": "done"}), flush=True)
    sys.exit(0)
base = os.environ["SWITCHYARD_URL"].rstrip("/") + "/api/v1"
session = os.environ["SWITCHYARD_SESSION"]
question = {"hook": "PermissionRequest", "tool_name": "Write", "question": "Allow Write?", "choices": ["allow", "deny"]}
event = {"id": f"q-{os.environ['SWITCHYARD_RUN']}", "type": "input_request", "payload": question}
event["timestamp"] = dt.datetime.now(dt.UTC).isoformat()
with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {os.environ['SWITCHYARD_KEY']}"}, timeout=30) as c:
    c.post(f"/sessions/{session}/events/", json=event).raise_for_status()
    c.post(f"/sessions/{session}/transition/", json={"status": "waiting_for_input"}).raise_for_status()
call = {"id": "toolu_bench", "name": "Write", "input": {"file_path": "notes.md"}}
result = {
    "type": "result",
    "subtype": "success",
    "stop_reason": "tool_deferred",
    "result": "",
    "deferred_tool_use": call,
}
print(json.dumps(result), flush=True)
