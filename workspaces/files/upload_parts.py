"""Temporary upload files left behind by uploads that died, removed.

An upload is written to ``.<name>.<32 hex>.part`` beside its destination (``files.staged_file``;
backups do the same in ``SAVED_REPORTS_ROOT``) and removed or renamed when the request ends.
A web process killed mid-body (kill -9, a crash, the machine going down) never gets to that
``finally``, and the file stayed forever. It is never an artifact (dot names never are), but it
holds disk space. Such a file is written to at every block while its upload is alive, so one
whose mtime is older than ``UPLOAD_TIMEOUT_SECONDS`` has no writer any more. Younger ones are
kept even at start: another web process (gunicorn runs several) may be writing them right now.

Run by the periodic reconcile task and once at each web start (config/asgi.py).
"""

import logging
import os
import re
import stat
import threading
import time
from pathlib import Path

from django.conf import settings

logger = logging.getLogger(__name__)

# Exactly the names files.staged_file and backups.backup_staged give their temporaries.
PART_NAME = re.compile(r"\..+\.[0-9a-f]{32}\.part", re.DOTALL)


def upload_parts_sweep(*, older_than_seconds: int | None = None) -> int:
    """Remove abandoned upload temporaries under WORKSPACE_ROOT and SAVED_REPORTS_ROOT; how many.

    Walks with directory descriptors and never follows a symbolic link, so a folder an agent
    swaps for a link cannot point the removal anywhere else.
    """
    age = settings.UPLOAD_TIMEOUT_SECONDS if older_than_seconds is None else older_than_seconds
    cutoff = time.time() - age
    removed = 0
    for root in (Path(settings.WORKSPACE_ROOT), Path(settings.SAVED_REPORTS_ROOT)):
        if not root.is_dir():
            continue
        for _folder, _dirs, names, dir_fd in os.fwalk(root, follow_symlinks=False):
            for name in names:
                if PART_NAME.fullmatch(name) and _remove_if_stale(name, dir_fd, cutoff):
                    removed += 1
    if removed:
        logger.info("removed %d abandoned upload temporaries (.part files)", removed)
    return removed


def _remove_if_stale(name: str, dir_fd: int, cutoff: float) -> bool:
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if not stat.S_ISREG(st.st_mode) or st.st_mtime >= cutoff:
            return False
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return False  # its upload finished (renamed or removed it) while we looked
    return True


def upload_parts_sweep_in_background() -> threading.Thread:
    """The web start's sweep, off the start-up path: a large tree must not delay serving. Returns
    its thread (started)."""

    def sweep() -> None:
        try:
            upload_parts_sweep()
        except OSError:
            logger.exception("the start-up sweep of upload temporaries failed; the reconcile tries again")

    thread = threading.Thread(target=sweep, name="upload-parts-sweep", daemon=True)
    thread.start()
    return thread
