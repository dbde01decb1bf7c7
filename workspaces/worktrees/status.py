"""A worktree's status for the monitor page: commits ahead, uncommitted changes, recent files, holder."""

import heapq
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime

from django.db import connection
from django.utils import timezone

from workspaces.models import Worktree, WorktreeClaimRequest
from workspaces.worktrees import git
from workspaces.worktrees.services import worktree_changes

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
    host: str = "server"  # where the folder is: the server's machine or a runner's
    reported_at: datetime | None = None  # a runner's worktree: when its runner last said how it is


# Git processes and folder walks mostly wait (the GIL is released): a few at once finish a
# monitor page of many worktrees in a fraction of the time, without flooding a small machine.
STATUS_THREADS = 4


def worktree_statuses(worktrees: list[Worktree]) -> list[WorktreeStatus]:
    """``worktree_status`` of each, in order, a few at a time. Each worktree must carry its
    repository, holder and ``waiting`` (annotated): the threads make no queries."""

    if len(worktrees) < 2:  # on the caller's thread, and its connection stays open
        return [worktree_status(worktree=worktree, waiting=worktree.waiting) for worktree in worktrees]

    def in_thread(worktree: Worktree) -> WorktreeStatus:
        try:
            return worktree_status(worktree=worktree, waiting=worktree.waiting)
        finally:
            connection.close()  # this pool thread's own, if something did open one after all

    with ThreadPoolExecutor(max_workers=STATUS_THREADS, thread_name_prefix="worktree-status") as pool:
        return list(pool.map(in_thread, worktrees))


def worktree_status(*, worktree: Worktree, waiting: int | None = None) -> WorktreeStatus:
    """Commits ahead of the base, uncommitted changes, the files changed last, and the holder.
    ``waiting``: the queue's length when the caller has it (else one query)."""
    if waiting is None:
        waiting = worktree.queue.filter(status=WorktreeClaimRequest.Status.WAITING).count()
    now = timezone.now()
    status = WorktreeStatus(
        present=worktree.status == Worktree.Status.ACTIVE and os.path.isdir(worktree.real_path),
        base=worktree.repository.default_branch,
        holder=worktree.holder.slug if worktree.holder_id else None,
        lease_expires_at=worktree.lease_expires_at,
        lease_valid=bool(worktree.holder_id and worktree.lease_expires_at and worktree.lease_expires_at >= now),
        waiting=waiting,
    )
    if worktree.repository.runner_id is not None:
        return _as_reported(worktree, status, now=now)
    if not status.present:
        return status
    status.commits_ahead = git.git_commits_ahead(worktree.real_path, status.base)
    status.changes = worktree_changes(worktree=worktree)
    status.uncommitted = len(status.changes)
    status.recent_files = recent_files(root=worktree.real_path)
    return status


def _as_reported(worktree: Worktree, status: WorktreeStatus, *, now: datetime) -> WorktreeStatus:
    """A runner-hosted worktree, as its runner last reported it: the server cannot look."""
    reported = worktree.reported or {}
    status.host = worktree.repository.runner.name
    status.reported_at = worktree.reported_at
    status.present = worktree.status == Worktree.Status.ACTIVE and bool(reported.get("present"))
    if not status.present:
        return status
    since = int((now - worktree.reported_at).total_seconds()) if worktree.reported_at else 0
    status.commits_ahead = reported.get("commits_ahead")
    status.changes = [
        git.StatusEntry(code=str(item.get("code", "")), path=str(item.get("path", "")))
        for item in reported.get("changes", [])
    ]
    status.uncommitted = int(reported.get("uncommitted") or 0)
    status.recent_files = [
        RecentFile(path=str(item.get("path", "")), age_seconds=int(item.get("age_seconds") or 0) + since)
        for item in reported.get("recent_files", [])
    ]
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
