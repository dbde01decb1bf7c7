"""A worktree's status for the monitor page: commits ahead, uncommitted changes, recent files, holder."""

import heapq
import os
import time
from dataclasses import dataclass, field
from datetime import datetime

from django.utils import timezone

from workspaces import git
from workspaces.models import Worktree, WorktreeClaimRequest
from workspaces.worktrees import worktree_changes

RECENT_FILES = 10


@dataclass(frozen=True)
class RecentFile:
    path: str
    age_seconds: int


@dataclass
class WorktreeStatus:
    present: bool  # the folder exists
    base: str
    commits_ahead: int | None = None  # None when the base is unknown or the folder is gone
    uncommitted: int = 0
    changes: list[git.StatusEntry] = field(default_factory=list)
    recent_files: list[RecentFile] = field(default_factory=list)
    holder: str | None = None
    lease_expires_at: datetime | None = None
    lease_valid: bool = False
    waiting: int = 0


def worktree_status(*, worktree: Worktree) -> WorktreeStatus:
    """Commits ahead of the base, uncommitted changes, the files changed last, and the holder."""
    now = timezone.now()
    status = WorktreeStatus(
        present=worktree.status == Worktree.Status.ACTIVE and os.path.isdir(worktree.real_path),
        base=worktree.repository.default_branch,
        holder=worktree.holder.slug if worktree.holder_id else None,
        lease_expires_at=worktree.lease_expires_at,
        lease_valid=bool(worktree.holder_id and worktree.lease_expires_at and worktree.lease_expires_at >= now),
        waiting=worktree.queue.filter(status=WorktreeClaimRequest.Status.WAITING).count(),
    )
    if not status.present:
        return status
    status.commits_ahead = git.git_commits_ahead(worktree.real_path, status.base)
    status.changes = worktree_changes(worktree=worktree)
    status.uncommitted = len(status.changes)
    status.recent_files = recent_files(root=worktree.real_path)
    return status


def recent_files(*, root: str, limit: int = RECENT_FILES) -> list[RecentFile]:
    """The ``limit`` most recently modified files under ``root``, outside ``.git``, newest first."""
    found: list[tuple[float, str]] = []
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = [d for d in subfolders if d != ".git"]
        for name in files:
            if name == ".git":
                continue  # a linked worktree's pointer to its repository
            full = os.path.join(folder, name)
            try:
                found.append((os.lstat(full).st_mtime, os.path.relpath(full, root)))
            except FileNotFoundError:
                continue  # deleted while we looked
    now = time.time()
    newest = heapq.nlargest(limit, found)
    return [RecentFile(path=path, age_seconds=max(0, int(now - mtime))) for mtime, path in newest]
