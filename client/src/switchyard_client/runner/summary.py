"""A finished run's summary for the server: commits ahead of the base, the files changed, and the diff
as ``run-<id>.patch`` in the session's files."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from switchyard_client.api.client import Client
from switchyard_client.api.errors import SwitchyardError
from switchyard_client.runner.git import GitError, changes_since
from switchyard_client.runner.repos import HostedRepository, sync_links_in
from switchyard_client.runner.state import RunState


def run_summary(state: RunState, *, agent: Client | None, say: Callable[[str], None]) -> dict[str, Any] | None:
    """What the run changed since its base (the patch uploaded to the session's files); None when its
    workdir is not a git checkout of its own."""
    s = state
    if not s.base or not s.workdir or not os.path.isdir(s.workdir):
        return None
    try:
        changes = changes_since(s.workdir, s.base, leave_out=_sync_links(s))
    except (GitError, ValueError) as exc:
        say(f"could not read the changes: {exc}")
        return None
    summary: dict[str, Any] = {
        "commits_ahead": changes.commits_ahead,
        "files_changed": changes.files_changed[:500],
        "artifacts": [],
    }
    if changes.patch and agent is not None and s.session:
        name = f"run-{s.id}.patch"
        try:
            agent.file_put(s.session, name, changes.patch)
            summary["patch"] = name
            summary["artifacts"].append(name)
        except SwitchyardError as exc:
            say(f"could not upload {name}: {exc}")
    return summary


def _sync_links(state: RunState) -> list[str]:
    """The links of the repository's sync folder in a worktree workdir: left out of the summary."""
    repo = (state.assignment.get("task") or {}).get("repository")
    if not state.worktree_id or not repo or not repo.get("path"):
        return []
    clone = HostedRepository(name=str(repo["name"]), path=str(repo["path"]), default_branch="")
    return sync_links_in(clone, state.workdir)
