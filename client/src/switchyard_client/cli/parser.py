"""The `switchyard` command's arguments and help (``build_parser``), with the exit codes the help lists.
Imported only once cli/__init__.py has handed `hook`, `runner` and `mcp` (but for its --help) on."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

EXIT_CODES = """exit codes: 0 ok, 1 other error, 2 bad usage, 3 not configured (URL, key or session missing),
4 invalid (400), 5 bad key (401), 6 not yours (403), 7 not found (404), 8 conflict (409), 9 too large (413),
10 throttled (429), 11 Switchyard unreachable, 12 server error (5xx)"""


def _json_arg(raw: str) -> object:
    if raw == "-":
        raw = sys.stdin.read()
    elif raw.startswith("@"):
        raw = Path(raw[1:]).read_text()
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from None


def build_parser():
    parser = argparse.ArgumentParser(
        prog="switchyard",
        description="Talk to Switchyard from the shell. JSON arguments also take '-' (stdin) or '@file'.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--url", help="Switchyard URL (default: $SWITCHYARD_URL)")
    parser.add_argument("--key", help="agent key (default: $SWITCHYARD_KEY)")
    parser.add_argument("--session", help="session id (default: $SWITCHYARD_SESSION, else .switchyard/session)")
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sub.add_parser("whoami", help="the agent behind the key")
    beat = sub.add_parser(
        "heartbeat",
        help="tell Switchyard this agent is alive (any other command counts too)",
        description="Any request of the agent counts as a heartbeat; this one says so without doing anything "
        "else. With --every it keeps beating until interrupted, for an agent that may be quiet for minutes.",
    )
    beat.add_argument("--every", type=float, metavar="SECONDS", help="beat again every SECONDS until Ctrl-C")

    session = sub.add_parser("session", help="open, show, move or end a session").add_subparsers(
        dest="action", required=True
    )
    start = session.add_parser("start", help="open a session and make it the current one")
    start.add_argument("--intent", required=True, help="what the session is for")
    start.add_argument("--id", help="your own session id (re-attaches when it is already yours)")
    start.add_argument("--label", action="append", dest="labels", help="a label (repeatable)")
    start.add_argument("--workspace", choices=["session", "shared"])
    start.add_argument("--status", choices=["planning", "running"], default="running")
    start.add_argument("--repo")
    start.add_argument("--branch")
    start.add_argument("--parent", help="the orchestrating session's id")
    start.add_argument("--task", type=int)
    start.add_argument("--metadata", type=_json_arg, help="a JSON object")
    show = session.add_parser("show", help="read a session")
    show.add_argument("id", nargs="?")
    status = session.add_parser("status", help="move the session to a status")
    status.add_argument(
        "status", choices=["planning", "running", "waiting_for_input", "completed", "failed", "cancelled"]
    )
    status.add_argument("--reason", default="")
    end = session.add_parser("end", help="end the session (completed unless --status)")
    end.add_argument("--status", choices=["completed", "failed", "cancelled"], default="completed")
    end.add_argument("--reason", default="")

    event = sub.add_parser("event", help="append an event to the session")
    event.add_argument("message", nargs="?", help="text, stored as payload {'message': ...}")
    event.add_argument("--type", default="log", help="log, plan_update, diff, milestone, input_request, ...")
    event.add_argument("--payload", type=_json_arg, help="a JSON object (instead of a message)")
    event.add_argument("--id", help="client id (a retry with it never duplicates)")

    tool = sub.add_parser("tool", help="record tool calls").add_subparsers(dest="action", required=True)
    tstart = tool.add_parser("start", help="record a running call; prints its id")
    tstart.add_argument("name")
    tstart.add_argument("--input", type=_json_arg, help="the full input as JSON (hashed, then redacted)")
    tstart.add_argument("--id", help="client id (default: a new one)")
    tfinish = tool.add_parser("finish", help="finish a running call by the id `tool start` printed")
    tfinish.add_argument("id")
    tfinish.add_argument("--status", choices=["success", "failure", "cancelled"], default="success")
    tfinish.add_argument("--output", type=_json_arg, help="output as JSON")
    tfinish.add_argument("--error", help="what went wrong")

    checkpoint = sub.add_parser("checkpoint", help="save or show state").add_subparsers(dest="action", required=True)
    save = checkpoint.add_parser("save", help="save a checkpoint")
    save.add_argument("state", type=_json_arg, help="the state as JSON, '-' or '@file'")
    save.add_argument("--id", help="client id")
    checkpoint.add_parser("show", help="the latest checkpoint")

    milestone = sub.add_parser("milestone", help="record a milestone")
    milestone.add_argument("text")
    milestone.add_argument("--id", help="client id")

    put = sub.add_parser("put", help="upload a file into the session's workspace")
    put.add_argument("file", type=Path)
    put.add_argument("--as", dest="path", help="path in the workspace (default: the file's name)")
    put.add_argument("--tool-use-id", help="the tool call that wrote it")
    get = sub.add_parser("get", help="download a file from the session's workspace")
    get.add_argument("path")
    get.add_argument("-o", "--output", type=Path, help="local file (default: stdout)")
    sub.add_parser("files", help="list the session's artifacts")

    task = sub.add_parser("task", help="claim and finish tasks").add_subparsers(dest="action", required=True)
    claim_next = task.add_parser("claim-next", help="claim the best ready task (prints nothing ready when none)")
    claim_next.add_argument("--campaign", type=int)
    claim_next.add_argument("--no-session", action="store_true", help="don't tie it to the current session")
    for name, help_text in (("claim", "claim this task"), ("release", "give it back"), ("show", "read a task")):
        one = task.add_parser(name, help=help_text)
        one.add_argument("id", type=int)
    complete = task.add_parser("complete", help="finish a claimed task")
    complete.add_argument("id", type=int)
    complete.add_argument("--review", action="store_true", help="to review instead of done")
    fail = task.add_parser("fail", help="report a claimed task as failed")
    fail.add_argument("id", type=int)
    fail.add_argument("--error", required=True)
    fail.add_argument("--retry", action="store_true", help="back to ready for another try")
    tlist = task.add_parser("list", help="list tasks")
    tlist.add_argument("--status")

    worktree = sub.add_parser("worktree", help="git worktrees").add_subparsers(dest="action", required=True)
    wcreate = worktree.add_parser("create", help="create <type>-<name> beside a registered repository (idempotent)")
    wcreate.add_argument("repository", type=int, help="repository id (see `switchyard worktree repos`)")
    wcreate.add_argument("--type", required=True, help="feat, fix, review, trunk, ...")
    wcreate.add_argument("--name")
    wcreate.add_argument("--ref")
    wcreate.add_argument("--pr", type=int, dest="pr_number")
    wclaim = worktree.add_parser("claim", help="claim on a lease (again: renew)")
    wclaim.add_argument("id", type=int)
    wclaim.add_argument("--wait", action="store_true", help="queue instead of failing when it is taken")
    for name, help_text in (("release", "release it"), ("show", "read it with its git status")):
        one = worktree.add_parser(name, help=help_text)
        one.add_argument("id", type=int)
    worktree.add_parser("repos", help="list registered repositories")

    resume = sub.add_parser("resume", help="what to pick up: checkpoint, open tool calls, milestones, claims")
    resume.add_argument("id", nargs="?")
    sub.add_parser("hook", help="record one Claude Code hook payload from stdin (always exits 0)")
    sub.add_parser("runner", help="run agents for Switchyard on this machine (see `switchyard runner --help`)")
    sub.add_parser(
        "mcp",
        help="serve the Model Context Protocol over stdio (needs the mcp extra)",
        description="Serve Switchyard's agent tools over MCP on stdin/stdout: claim tasks, report progress and "
        "milestones, checkpoints, workspace files, worktrees, and questions to the product owner. "
        "Configured by SWITCHYARD_URL and SWITCHYARD_KEY; the session is SWITCHYARD_SESSION, the current one, "
        "or opened on first use.",
    )
    return parser
