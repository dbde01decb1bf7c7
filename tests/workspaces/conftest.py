"""Real git repositories in temporary folders, for the worktree tests.

Layout, as the worktree services expect it::

    tmp_path/code/app/          the clone (branch main, two commits)
    tmp_path/code/<type>-<name> worktrees, made beside it
    tmp_path/code/sync/app/     shared configuration linked into each worktree
    tmp_path/origin.git         a bare "origin" with refs/pull/7/head (the `origin` fixture)
"""

import os
import subprocess
from pathlib import Path

import pytest

from config.actors import Actor
from workspaces.worktrees.services import repository_register

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.com",
    "GIT_COMMITTER_NAME": "Test Author",
    "GIT_COMMITTER_EMAIL": "author@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,  # the machine's own settings (signing, hooks) stay out
    "GIT_TERMINAL_PROMPT": "0",
}


def git(folder: Path | str, *args: str) -> str:
    env = {**os.environ, **GIT_IDENTITY}
    done = subprocess.run(
        ["git", "-C", str(folder), *args], env=env, capture_output=True, text=True, check=False, timeout=60
    )
    assert done.returncode == 0, f"git {' '.join(args)} failed: {done.stderr}"
    return done.stdout


def commit_file(folder: Path, name: str, text: str, message: str) -> str:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    git(folder, "add", "--", name)
    git(folder, "commit", "-q", "-m", message)
    return git(folder, "rev-parse", "HEAD").strip()


def tree_snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` outside .git, with its bytes: to prove nothing changed."""
    snapshot = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            full = Path(dirpath) / name
            snapshot[str(full.relative_to(folder))] = full.read_bytes()
    return snapshot


@pytest.fixture
def code_dir(tmp_path) -> Path:
    folder = tmp_path / "code"
    folder.mkdir()
    return folder


@pytest.fixture
def clone(code_dir) -> Path:
    folder = code_dir / "app"
    folder.mkdir()
    git(folder, "init", "-q", "-b", "main")
    commit_file(folder, "README.md", "# app\n", "Initial commit")
    commit_file(folder, "src/app.py", "print('hello')\n", "Add the app")
    return folder


@pytest.fixture
def repository(db, clone):
    repository, _ = repository_register(path=str(clone))
    return repository


@pytest.fixture
def origin(tmp_path, clone) -> dict:
    """A bare origin for the clone, with pull request 7 (one commit on top of main) pushed to it."""
    bare = tmp_path / "origin.git"
    git(tmp_path, "clone", "-q", "--bare", str(clone), str(bare))
    git(clone, "remote", "add", "origin", str(bare))
    git(clone, "fetch", "-q", "origin")
    contributor = tmp_path / "contributor"
    git(tmp_path, "clone", "-q", str(bare), str(contributor))
    sha = commit_file(contributor, "src/login.py", "def login(): ...\n", "Add login")
    git(contributor, "push", "-q", "origin", "HEAD:refs/pull/7/head")
    return {"path": bare, "pr_sha": sha}


@pytest.fixture
def actor(agent) -> Actor:
    return Actor(agent=agent)


@pytest.fixture
def other_actor(other_agent) -> Actor:
    return Actor(agent=other_agent)


@pytest.fixture
def staff_actor(staff_user) -> Actor:
    return Actor(user=staff_user)
