"""The git clones a runner holds (SPEC §8: a repository lives on one host). The runner registers
them with Switchyard at start-up, makes a task's worktree beside its clone with the files of the
clone's sync folder linked in (as the server does for its own clones), reports every worktree's
status now and then with its heartbeat, and removes the folders Switchyard says were removed.

Layout, as on the server: clone ``<parent>/<name-of-clone>``, worktrees ``<parent>/<type>-<task>``
on the branch of the same name, shared configuration in ``<parent>/sync/<repository>/``.
"""

from __future__ import annotations

import fcntl
import heapq
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from switchyard_client.runner.config import RepositoryConfig, RunnerConfigError
from switchyard_client.runner.git import GitError, git

REPORT_EVERY = 30.0  # seconds between worktree reports (a git status and a walk per worktree)
RECENT_FILES = 10
REPORTED_CHANGES = 200


@dataclass
class HostedRepository:
    name: str
    path: str  # the clone's real path
    default_branch: str
    id: int = 0  # Switchyard's, once registered

    @property
    def parent(self) -> str:
        return os.path.dirname(self.path)

    @property
    def sync_dir(self) -> str:
        return os.path.join(self.parent, "sync", self.name)


def repository_check(config: RepositoryConfig) -> HostedRepository:
    """The clone of ``config`` as it is on disk; RunnerConfigError unless it is a main clone's top."""
    where = f"[repositories.{config.name}] path"
    path = str(config.path)
    if not os.path.isdir(path):
        raise RunnerConfigError(f"{where}: {path} is not a folder")
    try:
        top = git(path, "rev-parse", "--show-toplevel").strip()
        common = git(path, "rev-parse", "--path-format=absolute", "--git-common-dir").strip()
    except GitError as exc:
        raise RunnerConfigError(f"{where}: {path} is not a git clone ({exc})") from None
    if os.path.realpath(top) != path:
        raise RunnerConfigError(f"{where}: {path} is inside the clone at {top}; give the clone's top folder")
    if os.path.realpath(common) != os.path.join(path, ".git"):
        raise RunnerConfigError(f"{where}: {path} was made by `git worktree add`; give the main clone")
    branch = config.default_branch or _default_branch(path)
    return HostedRepository(name=config.name, path=path, default_branch=branch)


def _default_branch(path: str) -> str:
    origin = git(path, "symbolic-ref", "--quiet", "--short", "refs/remotes/origin/HEAD", check=False).strip()
    if origin.startswith("origin/"):
        return origin[len("origin/") :]
    current = git(path, "symbolic-ref", "--quiet", "--short", "HEAD", check=False).strip()
    return current or "main"


# --- worktrees ------------------------------------------------------------------------------------------


@contextmanager
def clone_locked(repo: HostedRepository) -> Iterator[None]:
    """One worktree change at a time per clone (the server takes the same lock on its clones):
    ``git worktree add`` writes ``.git/worktrees/<name>/`` in steps, and another ``git worktree``
    listing in between fails ("failed to read .../commondir"). A flock on the clone's folder."""
    fd = os.open(repo.path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def worktree_add(repo: HostedRepository, folder: str) -> str:
    """The worktree ``folder`` beside the clone on the branch ``folder``, made now or as it was left
    (a runner that crashed after making it finds it again); the sync folder's files linked in."""
    path = os.path.join(repo.parent, folder)
    with clone_locked(repo):
        known = worktree_paths(repo)
        if path in known and not os.path.isdir(path):
            git(repo.path, "worktree", "prune")
            known = worktree_paths(repo)
        if path not in known:
            if os.path.lexists(path):
                raise GitError(f"{path} exists and is not a worktree of {repo.name}; it was left alone")
            if git(repo.path, "rev-parse", "--verify", "--quiet", f"refs/heads/{folder}", check=False).strip():
                git(repo.path, "worktree", "add", path, folder)
            else:
                git(repo.path, "worktree", "add", "-b", folder, path, repo.default_branch)
    sync_link(repo, path)
    return path


def worktree_paths(repo: HostedRepository) -> list[str]:
    """The linked worktrees git knows of beside the clone (not the clone itself)."""
    listing = git(repo.path, "worktree", "list", "--porcelain")
    paths = [line[len("worktree ") :] for line in listing.splitlines() if line.startswith("worktree ")]
    return [p for p in paths if p != repo.path and os.path.dirname(p) == repo.parent]


def sync_sources(repo: HostedRepository) -> list[str]:
    """Logical paths of the regular files in the sync folder (no .git, no links)."""
    found = []
    for folder, subfolders, files in os.walk(repo.sync_dir):
        subfolders[:] = sorted(d for d in subfolders if d != ".git" and not os.path.islink(os.path.join(folder, d)))
        for name in sorted(files):
            full = os.path.join(folder, name)
            if name != ".git" and os.path.isfile(full) and not os.path.islink(full):
                found.append(os.path.relpath(full, repo.sync_dir))
    return found


def sync_link(repo: HostedRepository, worktree: str) -> list[str]:
    """Link each sync file into the worktree (relative links), where nothing is in the way and no
    folder on the way is a symbolic link. Returns the links made."""
    made = []
    for logical in sync_sources(repo):
        target = os.path.join(worktree, logical)
        parent = os.path.dirname(target)
        if _link_on_the_way(worktree, parent) or os.path.lexists(target):
            continue
        os.makedirs(parent, exist_ok=True)
        os.symlink(os.path.relpath(os.path.join(repo.sync_dir, logical), parent), target)
        made.append(logical)
    return made


def _link_on_the_way(root: str, folder: str) -> bool:
    while folder != root and folder.startswith(root + os.sep):
        if os.path.islink(folder):
            return True
        folder = os.path.dirname(folder)
    return False


def _is_our_link(repo: HostedRepository, worktree: str, logical: str) -> bool:
    full = os.path.join(worktree, logical)
    try:
        text = os.readlink(full)
    except OSError:
        return False
    return os.path.realpath(os.path.join(os.path.dirname(full), text)) == os.path.realpath(
        os.path.join(repo.sync_dir, logical)
    )


def sync_links_in(repo: HostedRepository, worktree: str) -> list[str]:
    """The sync folder's links in ``worktree`` (logical paths): configuration, not the agent's work."""
    return [logical for logical in sync_sources(repo) if _is_our_link(repo, worktree, logical)]


def worktree_remove(repo: HostedRepository, path: str, *, force: bool) -> None:
    """``git worktree remove`` (our sync links first: git counts them as untracked files)."""
    with clone_locked(repo):
        if path not in worktree_paths(repo):
            return  # gone already
        for logical in sync_sources(repo):
            if _is_our_link(repo, path, logical):
                os.unlink(os.path.join(path, logical))
        try:
            git(repo.path, "worktree", "remove", *(["--force"] if force else []), path)
        except GitError:
            sync_link(repo, path)  # put the links back: the folder stays as it was
            raise


# --- status ---------------------------------------------------------------------------------------------


def worktree_report(repo: HostedRepository, path: str) -> dict[str, Any]:
    """What the worktree monitor shows, for one folder: HEAD, commits ahead of the default branch,
    uncommitted changes (leaving out our sync links) and the files changed last."""
    item: dict[str, Any] = {"path": path}
    item["head"] = git(path, "rev-parse", "HEAD", check=False).strip()[:64]
    ahead = git(path, "rev-list", "--count", f"{repo.default_branch}..HEAD", check=False).strip()
    item["commits_ahead"] = int(ahead) if ahead.isdigit() else None
    changes = []
    raw = git(path, "status", "--porcelain=v1", "-z", "--untracked-files=all", check=False)
    entries = iter(raw.split("\0"))
    for entry in entries:
        if len(entry) < 4:
            continue
        code, name = entry[:2], entry[3:]
        if code[0] in "RC":
            next(entries, None)  # the rename's source path
        if code == "??" and _is_our_link(repo, path, name):
            continue
        changes.append({"code": code, "path": name})
    item["uncommitted"] = len(changes)
    item["changes"] = changes[:REPORTED_CHANGES]
    item["recent_files"] = _recent_files(path)
    return item


def _recent_files(root: str) -> list[dict[str, Any]]:
    found: list[tuple[float, str]] = []
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = [d for d in subfolders if d != ".git"]
        for name in files:
            if name == ".git":
                continue
            full = os.path.join(folder, name)
            try:
                found.append((os.lstat(full).st_mtime, os.path.relpath(full, root)))
            except FileNotFoundError:
                continue
    now = time.time()
    return [
        {"path": rel, "age_seconds": max(0, int(now - mtime))} for mtime, rel in heapq.nlargest(RECENT_FILES, found)
    ]


def reports(repos: list[HostedRepository]) -> list[dict[str, Any]]:
    """One report per worktree folder beside every clone; a clone git cannot read is skipped."""
    found = []
    for repo in repos:
        try:
            paths = worktree_paths(repo)
        except GitError:
            continue
        for path in paths:
            if os.path.isdir(path):
                found.append(worktree_report(repo, path))
    return found
