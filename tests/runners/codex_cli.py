"""The real Codex CLI for tests: where it is, and an environment that keeps it to the test.

`.ci/run` installs it pinned into ``.tools/codex`` (``npm install --prefix``); a developer may have
it on PATH instead. Tests that need it call ``require_codex()``: it skips when the CLI is missing,
unless ``REQUIRE_CODEX_CLI=1`` (set in CI), where a missing CLI fails the test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.runners.fake_openai_responses import API_KEY_ENV
from tests.worker import ROOT

CODEX_VERSION = "0.171.0"  # the version .ci/run installs; these tests were written against it
INSTALL_DIR = ROOT / ".tools" / "codex"


def codex_binary() -> Path | None:
    """``$CODEX_CLI``, else the pinned install under .tools/, else ``codex`` on PATH."""
    candidates = [os.environ.get("CODEX_CLI"), INSTALL_DIR / "node_modules" / ".bin" / "codex", shutil.which("codex")]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK) and Path(candidate).is_file():
            return Path(candidate)
    return None


def require_codex() -> Path:
    binary = codex_binary()
    if binary is None:
        message = (
            f"the Codex CLI is not installed (npm install --prefix {INSTALL_DIR} @openai/codex@{CODEX_VERSION}, "
            "as .ci/run does)"
        )
        if os.environ.get("REQUIRE_CODEX_CLI") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return binary


def codex_version(binary: Path, home: Path) -> str:
    done = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, timeout=60, env={**codex_env(home=home)}
    )
    return done.stdout.split()[-1] if done.stdout.strip() else ""


def codex_env(*, home: Path, key: str = "test-key", **extra: str) -> dict[str, str]:
    """An environment for Codex with a home of the test's (its ``.codex/config.toml`` names the
    stand-in: fake_openai_responses.codex_config) and the stand-in's key, and nothing of this
    machine's settings. PATH is the test process's (node, git, the CLI's own helpers)."""
    home.mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        API_KEY_ENV: key,
        "NO_COLOR": "1",
        "RUST_LOG": "error",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_AUTHOR_NAME": "Codex (test)",
        "GIT_AUTHOR_EMAIL": "codex@example.com",
        "GIT_COMMITTER_NAME": "Codex (test)",
        "GIT_COMMITTER_EMAIL": "codex@example.com",
    }
    env.update(extra)
    return env
