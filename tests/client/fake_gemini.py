"""A stand-in for the Gemini CLI on the wire (`gemini -p ... --output-format stream-json`), for the
runner's tests.

Installed in a test's PATH as ``gemini``. It takes the argv of the runner's built-in provider
(the client's runner/providers.py) and refuses unknown flags, as the real one would:
  gemini --prompt=PROMPT --output-format stream-json --approval-mode auto_edit
  gemini -r latest --prompt=PROMPT --output-format stream-json --approval-mode auto_edit
(``-p PROMPT`` too; a PROMPT starting with "-" after ``-p`` is read as an option, as yargs does)
and prints Gemini CLI's headless stream-json (docs/cli/headless.md), one JSON object a line, each
with a ``timestamp``: ``init`` {session_id, model}, ``message`` {role, content, delta},
``tool_use`` {tool_name, tool_id, parameters}, ``tool_result`` {tool_id, status, output},
``error`` {severity, message}, and a closing ``result`` {status, stats}.

Sessions are kept per project folder, as Gemini does, under $HOME/.gemini: ``-r latest`` resumes
the newest one of the current folder under the same session id, and fails like Gemini when there
is none. What it does comes from lines of the prompt:
  hold: PATH      wait until PATH exists before finishing (the tests kill it meanwhile)
  exit: N         the exit code (default 0; non-zero ends with an error result)
  commit: yes     commit its file in the current git checkout
With $FAKE_AGENT_RECORD set it writes its argv and the prompt it took there (JSON).
SIGTERM stops it (exit 143).
"""

import argparse
import datetime as dt
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

MODEL = "gemini-2.5-pro"


def say(line: dict) -> None:
    stamp = dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    print(json.dumps({"type": line.pop("type"), "timestamp": stamp, **line}), flush=True)


def option(prompt: str, name: str, default: str = "") -> str:
    found = re.search(rf"^\s*{name}:\s*(\S+)\s*$", prompt, re.MULTILINE)
    return found.group(1) if found else default


def project_sessions() -> Path:
    cwd = os.path.realpath(os.getcwd())
    folder = Path.home() / ".gemini" / "tmp" / hashlib.sha256(cwd.encode()).hexdigest() / "chats"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="gemini")
    parser.add_argument("-p", "--prompt", required=True)
    parser.add_argument("-o", "--output-format", choices=["text", "json", "stream-json"], default="text")
    parser.add_argument("--approval-mode", choices=["default", "auto_edit", "yolo", "plan"], default="default")
    parser.add_argument("-r", "--resume")
    parser.add_argument("-m", "--model", default=MODEL)
    parser.add_argument("-y", "--yolo", action="store_true")
    return parser.parse_args(argv)


def main() -> int:
    args = parse(sys.argv[1:])

    def on_term(*_):
        print("fake-gemini: SIGTERM, stopping", file=sys.stderr, flush=True)
        sys.exit(143)

    signal.signal(signal.SIGTERM, on_term)
    if args.output_format != "stream-json":
        sys.exit("fake-gemini: run me with --output-format stream-json")
    chats = project_sessions()
    if args.resume:
        saved = sorted((json.loads(p.read_text()) for p in chats.glob("*.json")), key=lambda s: s["updated"])
        if args.resume != "latest":
            saved = [s for s in saved if s["session_id"] == args.resume]
        if not saved:
            print(f"Error resuming session: no session {args.resume!r} for this project", file=sys.stderr, flush=True)
            return 42
        session = saved[-1]
    else:
        session = {"session_id": str(uuid.uuid4()), "turns": 0}
    session["turns"] += 1
    session["updated"] = time.time()
    (chats / f"{session['session_id']}.json").write_text(json.dumps(session))
    prompt = args.prompt
    if os.environ.get("FAKE_AGENT_RECORD"):
        Path(os.environ["FAKE_AGENT_RECORD"]).write_text(json.dumps({"argv": sys.argv[1:], "prompt": prompt}))
    turn = session["turns"]

    say({"type": "init", "session_id": session["session_id"], "model": args.model})
    say({"type": "message", "role": "user", "content": prompt})
    name = f"gemini-{os.environ.get('SWITCHYARD_RUN', 'x')}.txt"
    content = f"{os.environ.get('SWITCHYARD_TASK_TITLE', '')} (turn {turn})\n"
    tool_id = f"write_file-{int(time.time() * 1000)}-{turn}"
    path = os.path.join(os.getcwd(), name)
    say(
        {
            "type": "tool_use",
            "tool_name": "write_file",
            "tool_id": tool_id,
            "parameters": {"file_path": path, "content": content},
        }
    )
    with open(name, "a") as fh:
        fh.write(content)
    say({"type": "tool_result", "tool_id": tool_id, "status": "success", "output": f"Wrote {name}"})

    hold = option(prompt, "hold")
    while hold and not os.path.exists(hold):
        time.sleep(0.05)
    if option(prompt, "commit") == "yes":
        subprocess.run(["git", "add", name], check=True)
        subprocess.run(["git", "commit", "-q", "-m", f"Add {name}"], check=True)
    code = int(option(prompt, "exit", "0"))
    resumed = "resuming this work" in prompt
    for part in ("Done", f" (resumed {resumed})."):
        say({"type": "message", "role": "assistant", "content": part, "delta": True})
    stats = {"total_tokens": 1500, "input_tokens": 1400, "output_tokens": 100, "cached": 0, "duration_ms": 900}
    if code:
        say({"type": "error", "severity": "error", "message": f"fake failure {code}"})
        say({"type": "result", "status": "error", "error": {"type": "FatalError", "message": "fake"}, "stats": stats})
    else:
        say({"type": "result", "status": "success", "stats": {**stats, "tool_calls": 1}})
    print(f"fake-gemini: finishing with {code}", file=sys.stderr, flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
