"""The CLI's current session: ``SWITCHYARD_SESSION``, else ``.switchyard/session`` in this folder or the
nearest parent that has one, so `switchyard event ...` after `switchyard session start` needs no id."""

from __future__ import annotations

import os
from pathlib import Path

STATE_DIR = ".switchyard"
SESSION_FILE = "session"


def current_session(cwd: Path | None = None) -> str | None:
    from_env = os.environ.get("SWITCHYARD_SESSION", "").strip()
    if from_env:
        return from_env
    here = (cwd or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / STATE_DIR / SESSION_FILE
        if candidate.is_file():
            value = candidate.read_text().strip()
            return value or None
    return None


def remember_session(session_id: str, cwd: Path | None = None) -> Path:
    folder = (cwd or Path.cwd()) / STATE_DIR
    folder.mkdir(exist_ok=True)
    target = folder / SESSION_FILE
    target.write_text(session_id + "\n")
    return target
