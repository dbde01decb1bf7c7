"""A stand-in for the Codex CLI on the wire (`codex exec --json`), for the runner's tests.

Installed in a test's PATH as ``codex``. It takes the argv the runner's built-in provider gives
(the client's runner/providers.py, written against Codex CLI 0.125) and refuses anything else, as
the real one would:
  codex exec --json --sandbox MODE --skip-git-repo-check --cd DIR -- PROMPT
  codex exec resume --last --json -c key=value -- PROMPT          (in the folder of the session)
(a PROMPT starting with "-" before "--" is read as an option, and an unknown one is refused, as
Codex's clap parser does)
and prints what `codex exec --json` prints on stdout, one JSON object a line (codex-rs/exec
exec_events.rs): ``thread.started`` {thread_id}, ``turn.started``, ``item.started`` /
``item.completed`` {item: {id, type, ...}} for a ``command_execution`` (command,
aggregated_output, exit_code, status), a ``file_change`` (changes [{path, kind}], status) and the
``agent_message`` (text), then ``turn.completed`` {usage} or ``turn.failed`` {error}. Its own
chatter goes to stderr, as Codex's does.

A thread is kept under $CODEX_HOME/sessions (default ~/.codex), with the folder it ran in:
``resume --last`` continues the newest one of the current folder, under the same thread id, and
fails like Codex when there is none. What it does comes from lines of the prompt:
  hold: PATH      wait until PATH exists before finishing (the tests kill it meanwhile)
  exit: N         the exit code (default 0; non-zero ends with turn.failed)
  commit: yes     commit its file in the current git checkout
With $FAKE_AGENT_RECORD set it writes its argv and the prompt it took there (JSON).
SIGTERM stops it (exit 143).
"""

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path


def say(line: dict) -> None:
    print(json.dumps(line), flush=True)


def option(prompt: str, name: str, default: str = "") -> str:
    found = re.search(rf"^\s*{name}:\s*(\S+)\s*$", prompt, re.MULTILINE)
    return found.group(1) if found else default


def sessions() -> Path:
    home = Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")
    folder = home / "sessions"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def parse(argv: list[str]) -> argparse.Namespace:
    if not argv or argv[0] != "exec":
        sys.exit(f"fake-codex: only `codex exec` is faked, not {argv[:1]}")
    resume = len(argv) > 1 and argv[1] == "resume"
    parser = argparse.ArgumentParser(prog="codex exec resume" if resume else "codex exec")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("-c", "--config", action="append", default=[])
    parser.add_argument("--skip-git-repo-check", action="store_true")
    if resume:
        parser.add_argument("--last", action="store_true")
        parser.add_argument("rest", nargs="*")
    else:
        parser.add_argument("-s", "--sandbox", choices=["read-only", "workspace-write", "danger-full-access"])
        parser.add_argument("-C", "--cd")
        parser.add_argument("prompt")
    args = parser.parse_args(argv[2:] if resume else argv[1:])
    args.resume = resume
    if resume:
        # `resume --last [PROMPT]` or `resume SESSION_ID [PROMPT]`
        rest = list(args.rest)
        args.session = None if args.last else (rest.pop(0) if rest else None)
        if not args.last and not args.session:
            parser.error("give a SESSION_ID or --last")
        args.prompt = rest[0] if rest else ""
    for item in args.config:
        if "=" not in item:
            parser.error(f"-c wants key=value, not {item!r}")
    return args


def find_thread(args: argparse.Namespace) -> dict | None:
    cwd = os.path.realpath(os.getcwd())
    found = []
    for path in sessions().glob("*.json"):
        data = json.loads(path.read_text())
        if args.session and data["thread_id"] == args.session:
            return data
        if args.last and data["cwd"] == cwd:
            found.append((data["updated"], data))
    return max(found, key=lambda pair: pair[0])[1] if found else None


def main() -> int:
    args = parse(sys.argv[1:])

    def on_term(*_):
        print("fake-codex: SIGTERM, stopping", file=sys.stderr, flush=True)
        sys.exit(143)

    signal.signal(signal.SIGTERM, on_term)
    if not args.json:
        sys.exit("fake-codex: run me with --json")
    if args.resume:
        thread = find_thread(args)
        if thread is None:
            print("Error: No saved session found to resume", file=sys.stderr, flush=True)
            return 1
    else:
        if args.cd:
            os.chdir(args.cd)
        thread = {"thread_id": str(uuid.uuid4()), "cwd": os.path.realpath(os.getcwd()), "turns": 0}
    thread["turns"] += 1
    thread["updated"] = time.time()
    (sessions() / f"{thread['thread_id']}.json").write_text(json.dumps(thread))
    prompt = args.prompt
    if os.environ.get("FAKE_AGENT_RECORD"):
        Path(os.environ["FAKE_AGENT_RECORD"]).write_text(json.dumps({"argv": sys.argv[1:], "prompt": prompt}))
    print(f"fake-codex: thread {thread['thread_id']} turn {thread['turns']} in {os.getcwd()}", file=sys.stderr)
    say({"type": "thread.started", "thread_id": thread["thread_id"]})
    say({"type": "turn.started"})
    say({"type": "item.completed", "item": {"id": "item_0", "type": "reasoning", "text": "Writing the work file."}})

    name = f"codex-{os.environ.get('SWITCHYARD_RUN', 'x')}.txt"
    command = f"bash -lc 'echo {thread['turns']} >> {name}'"
    item = {"id": "item_1", "type": "command_execution", "command": command, "aggregated_output": ""}
    say({"type": "item.started", "item": {**item, "exit_code": None, "status": "in_progress"}})
    with open(name, "a") as fh:
        fh.write(f"{os.environ.get('SWITCHYARD_TASK_TITLE', '')} (turn {thread['turns']})\n")
    say({"type": "item.completed", "item": {**item, "exit_code": 0, "status": "completed"}})
    say(
        {
            "type": "item.completed",
            "item": {
                "id": "item_2",
                "type": "file_change",
                "changes": [{"path": name, "kind": "add"}],
                "status": "completed",
            },
        }
    )

    hold = option(prompt, "hold")
    while hold and not os.path.exists(hold):
        time.sleep(0.05)
    if option(prompt, "commit") == "yes":
        subprocess.run(["git", "add", name], check=True)
        subprocess.run(["git", "commit", "-q", "-m", f"Add {name}"], check=True)
    code = int(option(prompt, "exit", "0"))
    resumed = "resuming this work" in prompt
    say(
        {
            "type": "item.completed",
            "item": {"id": "item_3", "type": "agent_message", "text": f"done (resumed {resumed})"},
        }
    )
    if code:
        say({"type": "turn.failed", "error": {"message": f"fake failure {code}"}})
    else:
        say(
            {"type": "turn.completed", "usage": {"input_tokens": 1200, "cached_input_tokens": 200, "output_tokens": 80}}
        )
    print(f"fake-codex: finishing with {code}", file=sys.stderr, flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
