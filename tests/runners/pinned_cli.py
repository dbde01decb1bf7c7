"""An agent CLI that `.ci/run` installs pinned (``npm install --prefix .tools/<folder>``): finding it,
and the environment it starts from in a test.

Claude Code, the Gemini CLI and Codex are found the same way, so that CI (the pinned install) and a
developer (the CLI on PATH, or one named by a variable) run the same tests; a missing CLI skips its
tests, except in CI, which sets ``REQUIRE_<NAME>_CLI=1`` so that a broken install fails loudly.
claude_cli.py, gemini_cli.py and codex_cli.py say which CLI, and what else of its own it is given.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest


def find_cli(name: str, *, title: str, package: str, install_dir: Path, env_var: str, require_var: str) -> Path:
    """``$<env_var>``, else ``name`` in the pinned install at ``install_dir``, else ``name`` on PATH.

    None of them there: the test skips, or fails where ``$<require_var>`` is 1, with a message that
    says how to install ``package`` (``@scope/name@version``)."""
    candidates = [os.environ.get(env_var), install_dir / "node_modules" / ".bin" / name, shutil.which(name)]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK) and Path(candidate).is_file():
            return Path(candidate)
    message = f"{title} is not installed (npm install --prefix {install_dir} {package}, as .ci/run does)"
    if os.environ.get(require_var) == "1":
        pytest.fail(message)
    pytest.skip(message)


def cli_env(*, home: Path, git_name: str, git_email: str) -> dict[str, str]:
    """What a CLI's environment starts from: the test process's PATH (node, git, the CLI's own helpers)
    and nothing else of that environment; ``home`` (made here) as its home, so that it never reads or
    writes the machine's own settings; git as on a machine set up for it, committing as ``git_name``,
    but with nothing of this machine's git settings (signing, hooks)."""
    home.mkdir(parents=True, exist_ok=True)
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_AUTHOR_NAME": git_name,
        "GIT_AUTHOR_EMAIL": git_email,
        "GIT_COMMITTER_NAME": git_name,
        "GIT_COMMITTER_EMAIL": git_email,
    }
