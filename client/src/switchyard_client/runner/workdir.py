"""Where a run's agent works: a worktree beside this runner's own clone of the task's repository; else
one the server makes beside a clone it knows on this machine; else, for a run continuing one this
runner ran, that run's folder (for an answered waiting run, the folder it waited in); else the session's workspace, when it is on this machine; else a
folder of the runner's own."""

from __future__ import annotations

import os
import re
from typing import Any

from switchyard_client.api.client import Client
from switchyard_client.api.errors import ConnectionFailed, SwitchyardError
from switchyard_client.runner.git import GitError, git, head
from switchyard_client.runner.host import Host
from switchyard_client.runner.repos import HostedRepository, worktree_add
from switchyard_client.runner.state import RunState

_SLUG = re.compile(r"[a-z0-9][a-z0-9-]{0,31}")


def workdir_prepare(state: RunState, *, host: Host, agent: Client) -> None:
    """Make the run's workdir and note the commit its changes are measured from (``base``)."""
    s, task = state, state.assignment.get("task") or {}
    repo = task.get("repository")
    hosted = host.hosted(repo) if repo else None
    if hosted is not None:
        _hosted_worktree(state, hosted, task, host=host, agent=agent)
    elif repo and repo.get("runner") is None and repo.get("path") and os.path.isdir(repo["path"]):
        kind = str(task.get("type") or "")
        kind = kind if _SLUG.fullmatch(kind) else "task"
        try:
            tree = agent.worktree_create(int(repo["id"]), type=kind, name=str(task["id"]))
            agent.worktree_claim(int(tree["id"]))
        except SwitchyardError as exc:
            raise RuntimeError(f"could not prepare the worktree of {repo.get('name')}: {exc}") from exc
        s.workdir, s.worktree_id = tree["path"], int(tree["id"])
    elif _continued_here(state, host=host):
        s.workdir = str((state.assignment.get("resumes") or {})["workdir"])  # where the resumed session worked
    elif _parked_here(state):
        s.workdir = str(state.assignment["deferred"]["workdir"])  # where the answered session waited
    else:
        workspace = (agent.session_get(s.session).get("workspace") or {}).get("path")
        if workspace and os.path.isdir(workspace):
            s.workdir = workspace
        else:  # the server's files are on another machine: a folder of our own
            s.workdir = str(host.root / "workdirs" / f"run-{s.id}")
            os.makedirs(s.workdir, exist_ok=True)
    s.base = _git_base(s.workdir)
    host.store.save(s)


def _hosted_worktree(
    state: RunState, hosted: HostedRepository, task: dict[str, Any], *, host: Host, agent: Client
) -> None:
    """The task's worktree beside this runner's clone: made here, registered with the runner's
    key, claimed with the run's agent key (the monitor shows its holder)."""
    s = state
    kind = str(task.get("type") or "")
    kind = kind if _SLUG.fullmatch(kind) else "task"
    try:
        path = worktree_add(hosted, f"{kind}-{task['id']}")
        body = {"repository": hosted.id, "type": kind, "name": str(task["id"])}
        tree = host.api.request("POST", "runners/me/worktrees/", json=body).json()
        agent.worktree_claim(int(tree["id"]))
    except ConnectionFailed:
        raise  # RunWorker._patiently tries again: every step above is idempotent
    except (GitError, SwitchyardError) as exc:
        raise RuntimeError(f"could not prepare the worktree of {hosted.name}: {exc}") from exc
    s.workdir, s.worktree_id = path, int(tree["id"])
    host.reported_at = 0.0  # the monitor hears of it with the next heartbeat


def _continued_here(state: RunState, *, host: Host) -> bool:
    """A run continuing a session this runner ran, of a task without a repository: the agent session
    lives in that run's folder (Claude Code keeps its sessions per folder), so the work goes on there."""
    earlier = state.assignment.get("resumes") or {}
    folder = str(earlier.get("workdir") or "")
    return (
        state.assignment.get("kind") == "continue"
        and earlier.get("runner") == host.config.name
        and bool(folder)
        and os.path.isdir(folder)
    )


def _parked_here(state: RunState) -> bool:
    """An answered waiting run (deferral.py) of a task without a repository: its session is kept per
    folder (Claude Code's), so it resumes in the folder it worked in, still on this runner's disk."""
    parked = state.assignment.get("deferred")
    folder = str(parked.get("workdir") or "") if isinstance(parked, dict) else ""
    return bool(folder) and os.path.isdir(folder)


def _git_base(workdir: str) -> str:
    """HEAD of ``workdir`` when it is a git checkout of its own (not a folder inside someone
    else's repository, like a session workspace under a project), else ''."""
    try:
        top = git(workdir, "rev-parse", "--show-toplevel", check=False).strip()
        if not top or os.path.realpath(top) != os.path.realpath(workdir):
            return ""
        return head(workdir)
    except GitError:
        return ""
