"""The flat shared workspace as scratch space, the way the Denker seed keeps it.

Marked ephemeral (``Workspace.ephemeral``), ``WORKSPACE_ROOT/default/`` is emptied when
Switchyard shuts down (SIGTERM, SIGINT or SIGHUP), every file in it recorded and backed up
first: a file goes only once a verified copy of its current bytes is in SAVED_REPORTS_ROOT.
``manage.py observe`` does it when it stops; a supervisor (``make run``) can call
``shutdown_handlers_install`` to do the same in its own process.
"""

import logging
import os
import signal
import stat
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from config.actors import SYSTEM, Actor
from config.api.errors import DomainError
from config.safepaths import UnsafePath, clean_relative, root_descriptor
from workspaces.files.reconcile import GONE, artifact_observe, signature
from workspaces.files.uploads import hash_fd
from workspaces.models import Workspace

logger = logging.getLogger(__name__)

SHUTDOWN_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


@dataclass
class ClearReport:
    workspace_id: int
    removed: list[str] = field(default_factory=list)  # files (each with a verified backup), links, temporaries
    kept: list[str] = field(default_factory=list)  # with the reason


def workspace_shared_clear(*, actor: Actor = SYSTEM) -> ClearReport | None:
    """Back up every file of the shared workspace, then remove it, if the workspace is ephemeral.

    None when there is no shared workspace or it is not marked ephemeral. Symbolic links and
    dot-temporaries hold no work product and are removed without a backup; a sub-folder (the
    flat layout has none), a file whose backup failed, or one that changed meanwhile, stays.
    Running it twice, or from two processes at once, ends the same way.
    """
    root = Path(settings.WORKSPACE_ROOT) / settings.SHARED_WORKSPACE_NAME
    workspace = Workspace.objects.filter(
        kind=Workspace.Kind.SHARED, root_path__in={str(root), os.path.realpath(root)}
    ).first()
    if workspace is None or not workspace.ephemeral or workspace.status != Workspace.Status.ACTIVE:
        return None
    report = ClearReport(workspace_id=workspace.pk)
    if root.is_symlink() or not root.is_dir():
        return report
    with root_descriptor(root) as dir_fd:
        for name in sorted(os.listdir(dir_fd)):
            _clear_entry(workspace=workspace, dir_fd=dir_fd, name=name, actor=actor, report=report)
        os.fsync(dir_fd)
    logger.info(
        "cleared the ephemeral shared workspace %s: %d removed, %d kept", root, len(report.removed), len(report.kept)
    )
    return report


def _clear_entry(*, workspace: Workspace, dir_fd: int, name: str, actor: Actor, report: ClearReport) -> None:
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode) or (name.startswith(".") and stat.S_ISREG(st.st_mode)):
        _remove(dir_fd, name, report)
        return
    if not stat.S_ISREG(st.st_mode):
        report.kept.append(f"{name}: not a regular file")
        return
    try:
        parts = clean_relative(name, flat=True)
    except UnsafePath as exc:
        report.kept.append(f"{name}: {exc.reason}")
        return
    try:
        observed = artifact_observe(workspace=workspace, parts=parts, settle_ns=0, actor=actor)
    except (DomainError, OSError) as exc:
        report.kept.append(f"{name}: {exc}")
        return
    if observed.outcome == GONE:
        return
    if observed.version is None or not _backup_holds(observed.backup_location, observed.version.sha256):
        report.kept.append(f"{name}: no verified backup")
        return
    try:
        unchanged = signature(os.stat(name, dir_fd=dir_fd, follow_symlinks=False)) == observed.signature
    except FileNotFoundError:
        return
    if not unchanged:
        report.kept.append(f"{name}: changed while it was backed up")
        return
    _remove(dir_fd, name, report)


def _backup_holds(location: str | None, sha256: str) -> bool:
    """Read the backup again: the original is about to go."""
    if not location:
        return False
    try:
        fd = os.open(location, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        return hash_fd(fd)[1] == sha256
    finally:
        os.close(fd)


def _remove(dir_fd: int, name: str, report: ClearReport) -> None:
    with suppress(FileNotFoundError):
        os.unlink(name, dir_fd=dir_fd)
    report.removed.append(name)


def shutdown_handlers_install(*, then: Callable[[int], None] | None = None) -> Callable[[], None]:
    """On SIGTERM, SIGINT or SIGHUP: clear the shared workspace if it is ephemeral, then ``then(signum)``.

    Without ``then``, the signal does what it did before (the previous handler runs, or the
    process ends as the signal's default would have it). Returns a function that puts the
    previous handlers back. For a supervisor whose main thread waits on its children; a
    process that does database work in its main thread should set a flag in the handler and
    call ``workspace_shared_clear`` itself, as ``manage.py observe`` does.
    """
    previous = {}
    cleared = False

    def handle(signum, frame):
        nonlocal cleared
        if not cleared:
            cleared = True
            try:
                workspace_shared_clear()
            except Exception:
                logger.exception("could not clear the shared workspace on shutdown")
        if then is not None:
            then(signum)
            return
        prior = previous.get(signum)
        if callable(prior):
            prior(signum, frame)
        elif prior != signal.SIG_IGN:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    for signum in SHUTDOWN_SIGNALS:
        previous[signum] = signal.signal(signum, handle)

    def restore() -> None:
        for signum, handler in previous.items():
            signal.signal(signum, handler)

    return restore
