"""What a run changed in a git workdir: commits ahead of the base, files changed, and one patch from
the base to the folder as the agent left it (commits, uncommitted edits and new files alike), so a
reviewer can `git apply` it anywhere."""

from __future__ import annotations

import os
import subprocess
import tempfile
from dataclasses import dataclass, field

GIT_TIMEOUT = 60


class GitError(RuntimeError):
    pass


def git(workdir: str, *args: str, env: dict[str, str] | None = None, check: bool = True) -> str:
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=workdir,
            env={**os.environ, **(env or {}), "GIT_TERMINAL_PROMPT": "0"},
            capture_output=True,
            timeout=GIT_TIMEOUT,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitError(f"git {' '.join(args[:2])}: {exc}") from exc
    if check and done.returncode != 0:
        raise GitError(f"git {' '.join(args[:2])}: {done.stderr.decode(errors='replace').strip()[:500]}")
    return done.stdout.decode("utf-8", errors="replace")


def is_git_workdir(workdir: str) -> bool:
    try:
        return git(workdir, "rev-parse", "--is-inside-work-tree", check=False).strip() == "true"
    except GitError:
        return False


def head(workdir: str) -> str:
    return git(workdir, "rev-parse", "HEAD").strip()


@dataclass
class Changes:
    commits_ahead: int = 0
    files_changed: list[str] = field(default_factory=list)
    patch: bytes = b""


def changes_since(workdir: str, base: str, *, leave_out: list[str] | tuple[str, ...] = ()) -> Changes:
    """Everything between ``base`` and the folder's current state. A throwaway index holds the
    folder's state (``git add -A`` into it), so the agent's own index and files are never touched.
    ``leave_out``: untracked paths that are not the agent's work (the sync folder's links)."""
    ahead = int(git(workdir, "rev-list", "--count", f"{base}..HEAD").strip() or 0)
    with tempfile.TemporaryDirectory(prefix="switchyard-runner-") as tmp:
        env = {"GIT_INDEX_FILE": os.path.join(tmp, "index")}
        git(workdir, "read-tree", "HEAD", env=env)
        git(workdir, "add", "-A", env=env)
        if leave_out:
            git(workdir, "rm", "-q", "--cached", "--ignore-unmatch", "--", *leave_out, env=env)
        names = git(workdir, "diff", "--cached", "--name-only", "-z", base, env=env)
        patch = subprocess.run(
            ["git", "diff", "--cached", "--binary", base],
            cwd=workdir,
            env={**os.environ, **env},
            capture_output=True,
            timeout=GIT_TIMEOUT,
        ).stdout
    return Changes(commits_ahead=ahead, files_changed=[n for n in names.split("\0") if n], patch=patch)
