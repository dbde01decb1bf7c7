"""A review run (kind ``review``, SPEC §10) reads the task's change and comments; it never commits.

Two fences. While it runs, git in its environment runs hooks of ours (``core.hooksPath`` through
``GIT_CONFIG_*``, which outranks the repository's own config) that refuse a commit, a merge commit
and a push with a message saying why, so an agent learns at once. An agent can skip hooks
(``--no-verify``), so when it has exited the branch is checked: a head that moved from where the run
started fails the run and is put back (``git reset --mixed``: the branch as it was, what the agent
committed left uncommitted in the worktree, so nothing is lost and nothing reaches the change).
"""

from __future__ import annotations

import os
from pathlib import Path

from switchyard_client.runner.git import GitError, git, head

REFUSAL = (
    "switchyard: this is a review run: it reads the change and comments through the API "
    "(POST /api/v1/tasks/<id>/comments/); it may not {what}."
)
HOOKS = {
    "pre-commit": "commit",
    "pre-merge-commit": "commit",
    "pre-push": "push",
    "pre-rebase": "rewrite the branch",
    "pre-applypatch": "commit",
}


def review_hooks(root: Path) -> Path:
    """The folder of hooks that refuse (made once per runner root, idempotently)."""
    folder = root / "review-hooks"
    folder.mkdir(parents=True, exist_ok=True)
    for name, what in HOOKS.items():
        path = folder / name
        script = f"#!/bin/sh\necho '{REFUSAL.format(what=what)}' >&2\nexit 1\n"
        if not path.exists() or path.read_text() != script:
            tmp = path.with_suffix(".tmp")
            tmp.write_text(script)
            tmp.chmod(0o755)
            os.replace(tmp, path)
    return folder


def review_git_env(root: Path, env: dict[str, str]) -> dict[str, str]:
    """``GIT_CONFIG_*`` entries that point git at the refusing hooks, after any the environment has."""
    count = int(env.get("GIT_CONFIG_COUNT") or 0)
    return {
        "GIT_CONFIG_COUNT": str(count + 1),
        f"GIT_CONFIG_KEY_{count}": "core.hooksPath",
        f"GIT_CONFIG_VALUE_{count}": str(review_hooks(root)),
    }


def review_commits_refused(workdir: str, base: str) -> str:
    """'' when the workdir's head is still ``base``; else put it back and say what was refused."""
    if not base or not workdir or not os.path.isdir(workdir):
        return ""
    try:
        now = head(workdir)
        if now == base:
            return ""
        count = git(workdir, "rev-list", "--count", f"{base}..{now}", check=False).strip() or "?"
        git(workdir, "reset", "-q", "--mixed", base)
    except GitError as exc:
        return f"a review run may not commit, and its branch could not be checked: {exc}"
    return (
        f"a review run may not commit: it made {count} commit(s) (head {now[:12]}); the branch was put back to "
        f"{base[:12]}, what they changed left uncommitted in the worktree"
    )
