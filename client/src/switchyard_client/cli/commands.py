"""What each `switchyard` command does, and how its answer reads for a person (or as JSON)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from switchyard_client.api import types as t
from switchyard_client.api.client import Client
from switchyard_client.api.errors import ConfigurationError
from switchyard_client.api.keepalive import Keepalive
from switchyard_client.api.state import current_session, remember_session

# Commands that may run for minutes (a large upload or download): a heartbeat keeps going meanwhile.
LONG_RUNNING = {("put", None), ("get", None)}


def dispatch(args: argparse.Namespace) -> int:
    with Client(args.url, args.key) as client:
        command = (args.command, getattr(args, "action", None))
        handler = HANDLERS[command]
        if command not in LONG_RUNNING:
            return handler(client, args) or 0
        with Keepalive(client):
            return handler(client, args) or 0


def _session(args: argparse.Namespace, explicit: str | None = None) -> str:
    sid = explicit or args.session or current_session()
    if not sid:
        raise ConfigurationError("No session: run `switchyard session start --intent ...` or set SWITCHYARD_SESSION.")
    return sid


def _out(args: argparse.Namespace, data: Any, human: Callable[[Any], str]) -> None:
    if args.json:
        print(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        print(human(data))


# --- human formats ----------------------------------------------------------------------------------
def fmt_session(s: t.Session) -> str:
    workspace = (s.get("workspace") or {}).get("path") or "-"
    return f"session {s['id']} ({s['status']}) agent {s['agent']}\n  intent: {s['intent'] or '-'}\n  workspace: {workspace}"


def fmt_task(task: t.Task | None) -> str:
    if task is None:
        return "nothing ready"
    who = f", held by {task['assignee']}" if task.get("assignee") else ""
    return f"task {task['id']} [{task['status']}] {task['priority']} {task['title']}{who}"


def fmt_tool(call: t.ToolCall) -> str:
    took = f", {call['duration_ms']} ms" if call.get("duration_ms") is not None else ""
    return f"tool call {call['client_id'] or call['id']} {call['tool_name']} {call['status']}{took}"


def fmt_worktree(w: t.Worktree) -> str:
    holder = w.get("holder") or "nobody"
    lease = f" until {w['lease_expires_at']}" if w.get("lease_expires_at") else ""
    return f"worktree {w['id']} {w.get('branch')} ({w.get('status')}) at {w.get('path')}, held by {holder}{lease}"


def fmt_resume(r: t.Resume) -> str:
    lines = [fmt_session(r["session"]), f"  last event seq: {r['last_event_seq']}"]
    checkpoint = r.get("checkpoint")
    if checkpoint:
        state = json.dumps(checkpoint["state"], ensure_ascii=False)
        lines.append(f"latest checkpoint #{checkpoint['seq']} ({checkpoint['created_at']}): {_clip(state, 500)}")
    else:
        lines.append("no checkpoint yet")
    lines.append(f"open tool calls: {len(r['open_tool_calls'])}")
    lines += [f"  - {c['client_id'] or c['id']} {c['tool_name']} since {c['started_at']}" for c in r["open_tool_calls"]]
    lines.append(f"milestones: {len(r['milestones'])}")
    lines += [f"  - {m['created_at']}: {m['text']}" for m in r["milestones"]]
    lines.append(f"claimed tasks: {len(r['claimed_tasks'])}")
    lines += [f"  - {fmt_task(task)}" for task in r["claimed_tasks"]]
    lines.append(f"claimed worktrees: {len(r.get('claimed_worktrees', []))}")
    lines += [f"  - {fmt_worktree(w)}" for w in r.get("claimed_worktrees", [])]
    return "\n".join(lines)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


# --- handlers ---------------------------------------------------------------------------------------
def whoami(c: Client, a):
    _out(a, c.agent_me(), lambda x: f"{x['emoji']} {x['slug']} ({x['status']}, {x['provider']})")


def heartbeat(c: Client, a):
    if a.every is None:
        _out(a, c.agent_heartbeat(), lambda x: f"{x['slug']} alive at {x['last_heartbeat_at']}")
        return
    # Beside an agent that may be quiet for minutes: beat until interrupted.
    import time

    try:
        while True:
            _out(a, c.agent_heartbeat(), lambda x: f"{x['slug']} alive at {x['last_heartbeat_at']}")
            time.sleep(max(1.0, a.every))
    except KeyboardInterrupt:
        return


def session_start(c: Client, a):
    session = c.session_open(
        intent=a.intent,
        id=a.id,
        labels=a.labels,
        metadata=a.metadata,
        repo=a.repo,
        branch=a.branch,
        parent=a.parent,
        task=a.task,
        status=a.status,
        workspace=a.workspace,
    )
    remember_session(session["id"])
    _out(a, session, fmt_session)


def session_show(c: Client, a):
    _out(a, c.session_get(_session(a, a.id)), fmt_session)


def session_status(c: Client, a):
    moved = c.session_transition(_session(a), a.status, reason=a.reason)
    _out(
        a,
        moved,
        lambda x: (
            f"session {x['session']['id']} is {x['session']['status']}" + ("" if x["changed"] else " (unchanged)")
        ),
    )


def event(c: Client, a):
    if a.payload is None and a.message is None:
        raise ValueError("give a message or --payload")
    payload = a.payload if a.payload is not None else {"message": a.message}
    _out(a, c.event_append(_session(a), a.type, payload, id=a.id), lambda x: f"event #{x['seq']} ({x['type']})")


def tool_start(c: Client, a):
    _out(a, c.tool_call_start(_session(a), a.name, a.input, id=a.id), lambda x: x["client_id"])


def tool_finish(c: Client, a):
    call = c.tool_call_finish_by_client_id(_session(a), a.id, a.status, output=a.output, error=a.error)
    _out(a, call, fmt_tool)


def checkpoint_save(c: Client, a):
    saved = c.checkpoint_save(_session(a), a.state, id=a.id)
    _out(a, saved, lambda x: f"checkpoint #{x['seq']} saved ({x['size_bytes']} bytes)")


def checkpoint_show(c: Client, a):
    _out(a, c.checkpoint_latest(_session(a)), lambda x: json.dumps(x["state"], indent=2, ensure_ascii=False))


def milestone(c: Client, a):
    _out(a, c.milestone_record(_session(a), a.text, id=a.id), lambda x: f"milestone {x['id']}: {x['text']}")


def put(c: Client, a):
    written = c.file_put(_session(a), a.path or a.file.name, a.file, tool_use_id=a.tool_use_id)
    art, version = written["artifact"], written["version"]
    _out(
        a,
        written,
        lambda _: (
            f"{art['path']} v{version['number']} ({version['size']} bytes, {art['kind']})"
            + ("" if written["created"] else " unchanged")
        ),
    )


def get(c: Client, a):
    if a.output is not None:
        c.file_get(_session(a), a.path, to=a.output)
        _out(a, {"path": a.path, "saved_to": str(a.output)}, lambda x: f"saved to {x['saved_to']}")
    else:
        sys.stdout.buffer.write(c.file_get(_session(a), a.path) or b"")
        sys.stdout.flush()


def files(c: Client, a):
    listed = c.files_list(_session(a))
    _out(
        a,
        listed,
        lambda xs: (
            "\n".join(f"{x['path']}  {x['size']} bytes  v{len(x['versions'])}  {x['kind']}" for x in xs) or "no files"
        ),
    )


def task_claim_next(c: Client, a):
    session = None if a.no_session else (a.session or current_session())
    _out(a, c.task_claim_next(session=session, campaign=a.campaign), fmt_task)


def task_claim(c: Client, a):
    _out(a, c.task_claim(a.id, session=a.session or current_session()), fmt_task)


def task_release(c: Client, a):
    _out(a, c.task_release(a.id), fmt_task)


def task_show(c: Client, a):
    _out(a, c.task_get(a.id), fmt_task)


def task_complete(c: Client, a):
    _out(a, c.task_complete(a.id, review=a.review), fmt_task)


def task_fail(c: Client, a):
    _out(a, c.task_fail(a.id, a.error, retry=a.retry), fmt_task)


def task_list(c: Client, a):
    _out(a, c.tasks_list(status=a.status), lambda xs: "\n".join(map(fmt_task, xs)) or "no tasks")


def worktree_create(c: Client, a):
    _out(a, c.worktree_create(a.repository, a.type, a.name, ref=a.ref, pr_number=a.pr_number), fmt_worktree)


def worktree_claim(c: Client, a):
    claim = c.worktree_claim(a.id, wait=a.wait)
    where = f" (queued, position {claim['position']})" if claim["outcome"] == "queued" else ""
    _out(a, claim, lambda x: f"{x['outcome']}{where}: {fmt_worktree(x['worktree'])}")


def worktree_release(c: Client, a):
    _out(a, c.worktree_release(a.id), fmt_worktree)


def worktree_show(c: Client, a):
    _out(a, c.worktree_get(a.id), fmt_worktree)


def worktree_repos(c: Client, a):
    _out(a, c.repositories_list(), lambda xs: "\n".join(f"{r['id']}  {r['name']}  {r['path']}" for r in xs) or "none")


def resume(c: Client, a):
    # A restarted agent is alive again: the heartbeat renews the worktree leases it still holds
    # (and brings it back from "stale") before it reads what it holds.
    c.agent_heartbeat()
    _out(a, c.session_resume(_session(a, a.id)), fmt_resume)


def session_end(c: Client, a):
    moved = c.session_transition(_session(a), a.status, reason=a.reason)
    _out(a, moved, lambda x: f"session {x['session']['id']} is {x['session']['status']}")


HANDLERS: dict[tuple[str, str | None], Callable[[Client, argparse.Namespace], Any]] = {
    ("whoami", None): whoami,
    ("heartbeat", None): heartbeat,
    ("session", "start"): session_start,
    ("session", "show"): session_show,
    ("session", "status"): session_status,
    ("session", "end"): session_end,
    ("event", None): event,
    ("tool", "start"): tool_start,
    ("tool", "finish"): tool_finish,
    ("checkpoint", "save"): checkpoint_save,
    ("checkpoint", "show"): checkpoint_show,
    ("milestone", None): milestone,
    ("put", None): put,
    ("get", None): get,
    ("files", None): files,
    ("task", "claim-next"): task_claim_next,
    ("task", "claim"): task_claim,
    ("task", "release"): task_release,
    ("task", "show"): task_show,
    ("task", "complete"): task_complete,
    ("task", "fail"): task_fail,
    ("task", "list"): task_list,
    ("worktree", "create"): worktree_create,
    ("worktree", "claim"): worktree_claim,
    ("worktree", "release"): worktree_release,
    ("worktree", "show"): worktree_show,
    ("worktree", "repos"): worktree_repos,
    ("resume", None): resume,
}
