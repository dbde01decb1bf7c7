"""The real Gemini CLI for tests: where it is, and a home and environment that keep it to the test.

`.ci/run` installs it pinned into ``.tools/gemini-cli`` (``npm install --prefix``); a developer may
have it on PATH instead. Tests that need it call ``require_gemini()``: it skips when the CLI is
missing, unless ``REQUIRE_GEMINI_CLI=1`` (set in CI), where a missing CLI fails the test.

The CLI talks to the scripted stand-in of the Gemini API (fake_gemini_api.py) through
``GOOGLE_GEMINI_BASE_URL`` with an API key, and to nothing else: ``home_settings`` writes the
``~/.gemini/settings.json`` that turns off what it would otherwise reach out for at start or after
(usage statistics to Google, its own telemetry, update checks, IDE discovery), and picks the API key
as its way to sign in so no OAuth flow starts.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.worker import ROOT

GEMINI_CLI_VERSION = "0.61.0"  # the version .ci/run installs; these tests were written against it
INSTALL_DIR = ROOT / ".tools" / "gemini-cli"
MODEL = "gemini-2.5-pro"


def gemini_binary() -> Path | None:
    """``$GEMINI_CLI``, else the pinned install under .tools/, else ``gemini`` on PATH."""
    candidates = [
        os.environ.get("GEMINI_CLI"),
        INSTALL_DIR / "node_modules" / ".bin" / "gemini",
        shutil.which("gemini"),
    ]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK) and Path(candidate).is_file():
            return Path(candidate)
    return None


def require_gemini() -> Path:
    binary = gemini_binary()
    if binary is None:
        message = (
            f"the Gemini CLI is not installed (npm install --prefix {INSTALL_DIR} "
            f"@google/gemini-cli@{GEMINI_CLI_VERSION}, as .ci/run does)"
        )
        if os.environ.get("REQUIRE_GEMINI_CLI") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return binary


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
    home.mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "GOOGLE_GEMINI_BASE_URL": api_url,
        "GEMINI_API_KEY": "test",
        "NO_COLOR": "1",
        # git as on a machine set up for it, but with nothing of this machine's settings (signing, hooks).
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_AUTHOR_NAME": "Gemini CLI (test)",
        "GIT_AUTHOR_EMAIL": "gemini@example.com",
        "GIT_COMMITTER_NAME": "Gemini CLI (test)",
        "GIT_COMMITTER_EMAIL": "gemini@example.com",
    }
    env.update(extra)
    return env


def stream_lines(stdout: str) -> list[dict]:
    """The JSON objects of a ``--output-format stream-json`` output, one per line."""
    return [json.loads(line) for line in stdout.splitlines() if line.strip().startswith("{")]
