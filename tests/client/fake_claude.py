"""A stand-in for Claude Code on the wire, for the runner's tests.

`fake_claude.py --prompt=PROMPT (--session-id UUID | --resume UUID)` prints stream-json lines the way
`claude -p --output-format stream-json --verbose` does (system/init, assistant text and tool_use,
user tool_result, result with cost and usage), does its "work" in the current folder, and obeys
SIGTERM. What it does comes from lines of the prompt (the task's description):
  sleep: N        seconds of work, one progress line every 0.1 s
  gate: PATH      then work on (a progress line every 0.1 s) until PATH exists: the test says when
  quiet: N        then seconds of work that print nothing (an idle run, for the runner)
  exit: N         the exit code (default 0)
  commit: yes     commit its file in the current git checkout
  pidfile: PATH   write its pid there first (the tests kill it)
"""

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time


def say(line: dict) -> None:
    print(json.dumps(line), flush=True)


def option(prompt: str, name: str, default: str = "") -> str:
    found = re.search(rf"^\s*{name}:\s*(\S+)\s*$", prompt, re.MULTILINE)
    return found.group(1) if found else default


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("-p", "--prompt", dest="prompt", required=True)
    parser.add_argument("--session-id")
    parser.add_argument("--resume")
    args = parser.parse_args()
    prompt = args.prompt

    def on_term(*_):
        print("fake-claude: SIGTERM, stopping", flush=True)
        sys.exit(143)

    signal.signal(signal.SIGTERM, on_term)
    pidfile = option(prompt, "pidfile")
    if pidfile:
        with open(pidfile + ".tmp", "w") as fh:
            fh.write(str(os.getpid()))
        os.replace(pidfile + ".tmp", pidfile)
    session = args.resume or args.session_id
    say({"type": "system", "subtype": "init", "session_id": session, "model": "fake", "cwd": os.getcwd()})
    if args.resume:
        resumed = "resuming this work" in prompt
        say({"type": "assistant", "message": {"content": [{"type": "text", "text": f"resumed {session} {resumed}"}]}})
    say(
        {
            "type": "assistant",
            "message": {
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "Write", "input": {"file_path": "x"}}]
            },
        }
    )
    name = f"work-{os.environ.get('SWITCHYARD_RUN', 'x')}.txt"
    with open(name, "a") as fh:
        fh.write(f"{os.environ.get('SWITCHYARD_TASK_TITLE', '')}\n")
    say({"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]}})
    deadline = time.monotonic() + float(option(prompt, "sleep", "0"))
    tick = 0
    gate = option(prompt, "gate")
    while time.monotonic() < deadline or (gate and not os.path.exists(gate)):
        tick += 1
        print(f"working {tick}", flush=True)
        time.sleep(0.1)
    time.sleep(float(option(prompt, "quiet", "0")))
    if option(prompt, "commit") == "yes":
        subprocess.run(["git", "add", name], check=True)
        subprocess.run(["git", "commit", "-q", "-m", f"Add {name}"], check=True)
    code = int(option(prompt, "exit", "0"))
    print(f"fake-claude: finishing with {code}", file=sys.stderr, flush=True)
    say(
        {
            "type": "result",
            "subtype": "success" if code == 0 else "error",
            "is_error": code != 0,
            "total_cost_usd": 0.0123,
            "usage": {"input_tokens": 10, "output_tokens": 5},
            "result": "done",
        }
    )
    return code


if __name__ == "__main__":
    sys.exit(main())
