"""A tiny stand-in for an agent, run as its own process by the crash-resume test.

    python agent_script.py PLAN.json

It works in the current folder (where the CLI remembers the session) and follows the plan's
``steps`` in order. Each step is one of:

- ``["cli", ARG, ...]``: run ``switchyard --json ARG ...``; a non-zero exit stops the agent;
- ``["write", PATH, TEXT]``: write a local file (the work product the agent is producing);
- ``["batch", N]``: post N log events as one list write, each with a client id chosen first and
  saved to ``batch.json`` before it is sent (the way a spool remembers what it still owes);
- ``["batch-stall", N]``: the same, but the request stops halfway through its body (journaled as
  ``half_sent``) and hangs there: the agent is killed in the middle of the batch;
- ``["resend"]``: post ``batch.json`` again, with the same client ids.

After every step it appends a line to ``journal.jsonl`` (fsynced), so the test knows which
steps were acknowledged. At the end it writes ``{"waiting": true}`` and blocks, as an agent
thinking about its next move would, until it is killed; with ``"exit": true`` it exits instead.
"""

import json
import os
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

JOURNAL = Path("journal.jsonl")
BATCH = Path("batch.json")


def journal(entry: dict) -> None:
    with JOURNAL.open("a") as out:
        out.write(json.dumps(entry) + "\n")
        out.flush()
        os.fsync(out.fileno())


def run_cli(args: list[str]) -> object:
    done = subprocess.run(
        [sys.executable, "-m", "switchyard_client.cli", "--json", *args], capture_output=True, text=True, timeout=60
    )
    if done.returncode != 0:
        journal({"failed": args, "code": done.returncode, "stderr": done.stderr[-2000:]})
        sys.exit(1)
    return json.loads(done.stdout) if done.stdout.strip() else None


def post_batch(items: list[dict]) -> dict:
    from switchyard_client.api.client import Client
    from switchyard_client.api.state import current_session

    with Client() as client:
        return client.events_append(current_session(), items)


def post_stalled(items: list[dict]) -> None:
    """Send the first half of the batch's body, then hang with the request still open."""
    import httpx

    from switchyard_client.api.client import api_base
    from switchyard_client.api.state import current_session

    body = json.dumps(items).encode()

    def chunks():
        yield body[: len(body) // 2]
        # httpx asks for the next chunk once the first is written to the socket.
        journal({"half_sent": len(body) // 2, "of": len(body)})
        while True:
            time.sleep(3600)

    url = f"{api_base(os.environ['SWITCHYARD_URL'])}sessions/{current_session()}/events/"
    headers = {"Authorization": f"Bearer {os.environ['SWITCHYARD_KEY']}", "Content-Type": "application/json"}
    httpx.post(url, content=chunks(), headers=headers, timeout=None)


def batch_items(count: int) -> list[dict]:
    now = datetime.now(UTC).isoformat()
    return [
        {"id": uuid.uuid4().hex, "type": "log", "payload": {"batch_item": n, "text": "x" * 200}, "timestamp": now}
        for n in range(count)
    ]


def main(plan_path: str) -> int:
    plan = json.loads(Path(plan_path).read_text())
    for number, step in enumerate(plan["steps"]):
        kind, *args = step
        if kind == "cli":
            journal({"step": number, "cli": args, "out": run_cli(args)})
        elif kind == "write":
            Path(args[0]).write_text(args[1])
            journal({"step": number, "wrote": args[0]})
        elif kind == "batch":
            items = batch_items(args[0])
            BATCH.write_text(json.dumps(items))
            journal({"step": number, "sending": len(items)})
            answer = post_batch(items)
            journal({"step": number, "acked": [r["status"] for r in answer["results"]]})
        elif kind == "batch-stall":
            items = batch_items(args[0])
            BATCH.write_text(json.dumps(items))
            post_stalled(items)
        elif kind == "resend":
            answer = post_batch(json.loads(BATCH.read_text()))
            journal({"step": number, "acked": [r["status"] for r in answer["results"]]})
        else:
            raise ValueError(f"unknown step {kind!r}")
    if plan.get("exit"):
        journal({"done": True})
        return 0
    journal({"waiting": True})
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
