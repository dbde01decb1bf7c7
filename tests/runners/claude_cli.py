"""The real Claude Code CLI for tests: where it is, and an environment that keeps it to the test.

`.ci/run` installs it pinned into ``.tools/claude-code`` (``npm install --prefix``); a developer may
have it on PATH, or name it in ``$CLAUDE_CLI``. Tests that need it call ``require_claude()``: it skips
when the CLI is missing, unless ``REQUIRE_CLAUDE_CLI=1`` (set in CI), where a missing CLI fails the
test (pinned_cli.find_cli).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from tests.runners.pinned_cli import cli_env, find_cli
from tests.worker import ROOT

CLAUDE_CODE_VERSION = "2.1.332"  # the version .ci/run installs; these tests were written against it
INSTALL_DIR = ROOT / ".tools" / "claude-code"
HOOK_EVENTS = ("SessionStart", "PreToolUse", "PostToolUse", "Stop")


def require_claude() -> Path:
    return find_cli(
        "claude",
        title="the Claude Code CLI",
        package=f"@anthropic-ai/claude-code@{CLAUDE_CODE_VERSION}",
        install_dir=INSTALL_DIR,
        env_var="CLAUDE_CLI",
        require_var="REQUIRE_CLAUDE_CLI",
    )


def claude_version(binary: Path) -> str:
    done = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60, env=_base_env())
    return done.stdout.split()[0] if done.stdout.strip() else ""


def _base_env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}


def claude_env(*, home: Path, api_url: str, **extra: str) -> dict[str, str]:
    """An environment that points Claude Code at ``api_url`` and nowhere else.

    HOME is a folder of the test's, so it never reads (or writes) the machine's ~/.claude; everything
    it would send besides the conversation (telemetry, error reports, update checks, feedback surveys)
    is off. Nothing of the test process's environment is passed on but PATH."""
    return {
        **cli_env(home=home, git_name="Claude Code (test)", git_email="claude@example.com"),
        "ANTHROPIC_BASE_URL": api_url,
        "ANTHROPIC_API_KEY": "test",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_BUG_COMMAND": "1",
        "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
        "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1",
        **extra,
    }


def hook_command() -> str:
    """`switchyard hook`, run by this test's Python (the client package is installed in it)."""
    return shlex.join([sys.executable, "-m", "switchyard_client.cli", "hook"])


def hook_settings(command: str | None = None, events: tuple[str, ...] = HOOK_EVENTS) -> str:
    """The ``--settings`` JSON that wires ``events`` to the hook command."""
    command = command or hook_command()
    hooks: dict[str, list] = {}
    for event in events:
        entry: dict = {"hooks": [{"type": "command", "command": command}]}
        if event in ("PreToolUse", "PostToolUse"):
            entry["matcher"] = "*"
        hooks[event] = [entry]
    return json.dumps({"hooks": hooks})


def stream_lines(stdout: str) -> list[dict]:
    """The JSON objects of a ``--output-format stream-json`` output, one per line."""
    return [json.loads(line) for line in stdout.splitlines() if line.strip().startswith("{")]
