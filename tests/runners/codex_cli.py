"""The real Codex CLI for tests: where it is, and an environment that keeps it to the test.

`.ci/run` installs it pinned into ``.tools/codex`` (``npm install --prefix``); a developer may have
it on PATH, or name it in ``$CODEX_CLI``. Tests that need it call ``require_codex()``: it skips when
the CLI is missing, unless ``REQUIRE_CODEX_CLI=1`` (set in CI), where a missing CLI fails the test
(pinned_cli.find_cli).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.runners.fake_openai_responses import API_KEY_ENV
from tests.runners.pinned_cli import cli_env, find_cli
from tests.worker import ROOT

CODEX_VERSION = "0.171.0"  # the version .ci/run installs; these tests were written against it
INSTALL_DIR = ROOT / ".tools" / "codex"


def require_codex() -> Path:
    return find_cli(
        "codex",
        title="the Codex CLI",
        package=f"@openai/codex@{CODEX_VERSION}",
        install_dir=INSTALL_DIR,
        env_var="CODEX_CLI",
        require_var="REQUIRE_CODEX_CLI",
    )


def codex_version(binary: Path, home: Path) -> str:
    done = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, timeout=60, env={**codex_env(home=home)}
    )
    return done.stdout.split()[-1] if done.stdout.strip() else ""


def codex_env(*, home: Path, key: str = "test-key", **extra: str) -> dict[str, str]:
    """An environment for Codex with a home of the test's (its ``.codex/config.toml`` names the
    stand-in: fake_openai_responses.codex_config) and the stand-in's key, and nothing of this
    machine's settings. PATH is the test process's (node, git, the CLI's own helpers)."""
    return {
        **cli_env(home=home, git_name="Codex (test)", git_email="codex@example.com"),
        API_KEY_ENV: key,
        "NO_COLOR": "1",
        "RUST_LOG": "error",
        **extra,
    }
