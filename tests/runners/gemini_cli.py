"""The real Gemini CLI for tests: where it is, and a home and environment that keep it to the test.

`.ci/run` installs it pinned into ``.tools/gemini-cli`` (``npm install --prefix``); a developer may
have it on PATH, or name it in ``$GEMINI_CLI``. Tests that need it call ``require_gemini()``: it skips
when the CLI is missing, unless ``REQUIRE_GEMINI_CLI=1`` (set in CI), where a missing CLI fails the
test (pinned_cli.find_cli).

The CLI talks to the scripted stand-in of the Gemini API (fake_gemini_api.py) through
``GOOGLE_GEMINI_BASE_URL`` with an API key, and to nothing else: ``home_settings`` writes the
``~/.gemini/settings.json`` that turns off what it would otherwise reach out for at start or after
(usage statistics to Google, its own telemetry, update checks, IDE discovery), and picks the API key
as its way to sign in so no OAuth flow starts.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.runners.pinned_cli import cli_env, find_cli
from tests.worker import ROOT

GEMINI_CLI_VERSION = "0.61.0"  # the version .ci/run installs; these tests were written against it
INSTALL_DIR = ROOT / ".tools" / "gemini-cli"
MODEL = "gemini-2.5-pro"


def require_gemini() -> Path:
    return find_cli(
        "gemini",
        title="the Gemini CLI",
        package=f"@google/gemini-cli@{GEMINI_CLI_VERSION}",
        install_dir=INSTALL_DIR,
        env_var="GEMINI_CLI",
        require_var="REQUIRE_GEMINI_CLI",
    )


def gemini_version(binary: Path, home: Path) -> str:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home)}
    done = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60, env=env)
    return done.stdout.strip()


def home_settings(home: Path, **overrides: dict) -> Path:
    """Write ``home/.gemini/settings.json``: sign in with the API key, and nothing sent anywhere but
    the model API. ``overrides`` merge into its top-level sections (``general={"maxAttempts": 1}``)."""
    settings: dict[str, dict] = {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        # Usage statistics (Clearcut, to Google) and the CLI's own OpenTelemetry export.
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        # The npm registry check for a newer version, and its notice.
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        # Looking for an IDE companion to connect to.
        "ide": {"enabled": False},
        # A fixed model: the default ("auto") first asks a router model which one to use.
        "model": {"name": MODEL},
    }
    for section, values in overrides.items():
        settings[section] = {**settings.get(section, {}), **values}
    folder = home / ".gemini"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "settings.json"
    path.write_text(json.dumps(settings, indent=2))
    return path


def gemini_env(*, home: Path, api_url: str, **extra: str) -> dict[str, str]:
    """An environment that points the Gemini CLI at ``api_url`` and nowhere else.

    HOME is a folder of the test's (with ``home_settings`` in it), so it never reads or writes the
    machine's ~/.gemini. Nothing of the test process's environment is passed on but PATH."""
    return {
        **cli_env(home=home, git_name="Gemini CLI (test)", git_email="gemini@example.com"),
        "GOOGLE_GEMINI_BASE_URL": api_url,
        "GEMINI_API_KEY": "test",
        "NO_COLOR": "1",
        **extra,
    }


def stream_lines(stdout: str) -> list[dict]:
    """The JSON objects of a ``--output-format stream-json`` output, one per line."""
    return [json.loads(line) for line in stdout.splitlines() if line.strip().startswith("{")]
