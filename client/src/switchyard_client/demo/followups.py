"""What the demo agent does on a run that is not the task's first work (SWITCHYARD_RUN_KIND, SPEC §10):

- ``continue`` (a person requested changes): it reads its prompt (the request and the line comments,
  in $SWITCHYARD_PROMPT) and acts on it: the request goes into its notes file under "Changes
  requested", committed, so the task's diff shows the change;
- ``review`` (another agent was asked to review): it reads the task's change through the API and
  leaves a comment on the first line the change adds, never committing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Protocol

from switchyard_client.api.client import Client


class DemoAgent(Protocol):
    """What these steps use of demo/agent.py's DemoAgent (which imports this module)."""

    client: Client
    session: str
    workdir: Path
    task_id: str
    run_id: str
    notes_name: str

    def say(self, message: str) -> None: ...
    def tool(self, name: str, input: dict, work, *, say_before: str, keep_id: bool = False) -> dict[str, Any]: ...
    def write(self, path: Path, text: str) -> dict[str, Any]: ...
    def commit(self, path: Path) -> str | None: ...
    def is_git_repo(self) -> bool: ...


REVIEW_REMARK = "Demo review: this line is new; say in a test what it is for."


def continue_work(agent: DemoAgent) -> int:
    request = os.environ.get("SWITCHYARD_PROMPT", "").strip() or "(an empty request)"
    path = agent.workdir / agent.notes_name
    before = path.read_text(encoding="utf-8") if path.exists() else f"# Notes for task #{agent.task_id}\n"
    text = f"{before.rstrip()}\n\n## Changes requested (run {agent.run_id or '?'})\n\n{request}\n"
    agent.tool(
        "Edit",
        {"file_path": str(path), "purpose": "apply the requested changes"},
        lambda: agent.write(path, text),
        say_before=f"applying the requested changes to {agent.notes_name}",
    )
    commit = agent.commit(path) if agent.is_git_repo() else None
    done = "Requested changes applied" + (f" and committed ({commit})" if commit else "")
    agent.client.milestone_record(agent.session, done)
    agent.say(f"milestone: {done}")
    return 0


def review_change(agent: DemoAgent) -> int:
    change = agent.tool(
        "Bash",
        {"command": f"GET /api/v1/tasks/{agent.task_id}/diff/?format=json", "description": "read the change"},
        lambda: agent.client.request("GET", f"tasks/{agent.task_id}/diff/", params={"format": "json"}).json(),
        say_before="reading the task's change",
    )
    target = first_added_line(change)
    if target is None:
        agent.say("the change adds no line to comment on")
        agent.client.milestone_record(agent.session, "Reviewed: nothing to comment on")
        return 0
    path, line = target
    body = {"path": path, "line": line, "body": REVIEW_REMARK}
    agent.tool(
        "Bash",
        {"command": f"POST /api/v1/tasks/{agent.task_id}/comments/", "description": f"comment on {path}:{line}"},
        lambda: agent.client.request("POST", f"tasks/{agent.task_id}/comments/", json=body).json(),
        say_before=f"commenting on {path}:{line}",
    )
    agent.client.milestone_record(agent.session, f"Reviewed: 1 comment ({path}:{line})")
    agent.say("review done")
    return 0


def first_added_line(change: dict[str, Any]) -> tuple[str, int] | None:
    for item in change.get("files") or []:
        for hunk in item.get("hunks") or []:
            for line in hunk.get("lines") or []:
                if line.get("kind") == "added" and line.get("new"):
                    return str(item["path"]), int(line["new"])
    return None
