"""Files under ``WORKSPACE_ROOT`` becoming artifact versions.

Both the observer's events and the reconcile pass end in ``artifact_observe``: open the
file through ``safepaths`` (never through a symlink), wait until it has been quiet for the
settle time, hash it, record a version when its bytes differ from the latest one (the
artifact row is locked, identical bytes add nothing, so two observers never duplicate a
version), and back up work products. ``workspace_reconcile`` walks every registered
workspace folder and puts each file through the same function: this is how files written
while no observer was running, or whose events the kernel dropped, are picked up.

Which files count: in a session workspace, files below ``work_products/``,
``search_results/``, ``media/`` and ``workbench_activity/``; in the flat shared workspace,
the files at its root. A path with a component that starts with a dot (our own
``.<name>.<hex>.part`` temporaries, editors' swap files) is never an artifact.
"""

import logging
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import OuterRef, Subquery

from config.actors import SYSTEM, Actor
from config.api.errors import DomainError
from config.safepaths import UnsafePath, clean_relative, open_file_beneath
from workspaces.files.backups import BackupFailed, backup_present, backup_record, backup_staged, backup_wanted
from workspaces.files.services import SESSION_FOLDERS, artifact_record_version, workspace_shared
from workspaces.files.uploads import hash_fd
from workspaces.models import Artifact, ArtifactVersion, Workspace

logger = logging.getLogger(__name__)

OBSERVED_KINDS = (Workspace.Kind.SESSION, Workspace.Kind.SHARED)
# A file whose ctime is at least this far behind the moment we start reading it cannot change
# again without getting a later ctime (timestamps come from a clock that is at most a tick
# behind), so its stat signature is safe to remember as "these bytes".
QUIET_NS = 20_000_000
# The reconcile cannot tell a file whose close event was lost from one a writer still holds
# open and pauses in, so it records only files quiet for this long; younger ones are handed
# to the observer (which also gets the close event, if there is one) or left for next time.
RECONCILE_QUIET_NS = 2_000_000_000

# Outcomes of artifact_observe.
RECORDED = "recorded"  # a new version was recorded
UNCHANGED = "unchanged"  # same bytes as the latest version (its backup made if it lacked one)
BUSY = "busy"  # changed within the settle time, or while it was read: look again after retry_in
GONE = "gone"  # deleted (or replaced) before it could be read; its history stays
SKIPPED = "skipped"  # a symbolic link, not a regular file, or a name the workspace refuses

Signature = tuple[int, int, int, int, int]  # device, inode, size, mtime_ns, ctime_ns


def signature(st: os.stat_result) -> Signature:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@dataclass(frozen=True)
class Latest:
    """What the database holds as an artifact's latest version, read in bulk by the reconcile."""

    size: int
    sha256: str
    backed_up: bool


@dataclass
class Observed:
    outcome: str
    version: ArtifactVersion | None = None
    backup_location: str | None = None
    retry_in: float = 0.0
    signature: Signature | None = None
    backed_up: bool = False  # a backup was made by this call


class FileMemory:
    """What this process last recorded for each file, so an unchanged file is not read again.

    Keyed by (workspace id, path); holds the stat signature the bytes had and their sha256.
    Only in memory: a restarted observer hashes everything once in its first reconcile.
    """

    def __init__(self) -> None:
        self._known: dict[tuple[int, str], tuple[Signature, str]] = {}
        self._lock = threading.Lock()

    def matches(self, key: tuple[int, str], sig: Signature) -> bool:
        with self._lock:
            known = self._known.get(key)
        return known is not None and known[0] == sig

    def remember(self, key: tuple[int, str], sig: Signature, sha256: str) -> None:
        with self._lock:
            self._known[key] = (sig, sha256)


def artifact_observe(
    *,
    workspace: Workspace,
    parts: tuple[str, ...],
    settle_ns: int,
    memory: FileMemory | None = None,
    latest: Latest | None = None,
    quiet_since: Signature | None = None,
    actor: Actor = SYSTEM,
) -> Observed:
    """Record the file at ``parts`` if its bytes are new; back it up if it is a work product.

    The file must have been quiet for ``settle_ns`` (judged by its ctime, which nobody can set
    back; or, when the clock went backwards, by being unchanged since ``quiet_since``), and
    unchanged while it was read; otherwise the answer is BUSY with when to look again.
    ``latest`` (from a bulk read) lets an unchanged file go without a transaction. Bytes are
    read and copied outside any transaction; one short transaction per file records the
    version and, for a work product, publishes its verified copy and records where it is.
    """
    logical = "/".join(parts)
    try:
        fd = open_file_beneath(Path(workspace.root_path), parts)
    except FileNotFoundError:
        return Observed(GONE)
    except (UnsafePath, NotADirectoryError, IsADirectoryError) as exc:
        logger.info("skipped %s in %s: %s", logical, workspace.root_path, getattr(exc, "reason", exc))
        return Observed(SKIPPED)
    except OSError as exc:  # ELOOP: the workspace folder itself became a symlink; EACCES; ...
        logger.warning("skipped %s in %s: %s", logical, workspace.root_path, exc)
        return Observed(SKIPPED)
    try:
        return _observe_open(
            workspace=workspace,
            parts=parts,
            fd=fd,
            settle_ns=settle_ns,
            memory=memory,
            latest=latest,
            quiet_since=quiet_since,
            actor=actor,
        )
    finally:
        os.close(fd)


def _observe_open(
    *,
    workspace: Workspace,
    parts: tuple[str, ...],
    fd: int,
    settle_ns: int,
    memory: FileMemory | None,
    latest: Latest | None,
    quiet_since: Signature | None,
    actor: Actor,
) -> Observed:
    before = os.fstat(fd)
    sig = signature(before)
    key = (workspace.pk, "/".join(parts))
    if memory is not None and memory.matches(key, sig):
        return Observed(UNCHANGED, signature=sig)
    quiet_for = time.time_ns() - before.st_ctime_ns
    if quiet_for < settle_ns and sig != quiet_since:
        wait_ns = settle_ns - quiet_for if quiet_for >= 0 else settle_ns
        return Observed(BUSY, retry_in=wait_ns / 1e9, signature=sig)
    read_at = time.time_ns()
    wants_backup = backup_wanted(workspace=workspace, parts=parts)
    if latest is not None or not wants_backup:
        # Hash only: an unchanged file (the reconcile's usual case) needs no copy.
        size, sha256 = hash_fd(fd)
        if signature(os.fstat(fd)) != sig:
            return _changed_while_read(settle_ns)
        if (
            latest is not None
            and (latest.size, latest.sha256) == (size, sha256)
            and (latest.backed_up or not wants_backup)
        ):
            _remember(memory, key, sig, sha256, read_at, before)
            return Observed(UNCHANGED, signature=sig)
        if not wants_backup:
            with transaction.atomic():
                version, created = _record(workspace, parts, size, sha256, actor)
            _remember(memory, key, sig, sha256, read_at, before)
            return Observed(RECORDED if created else UNCHANGED, version=version, signature=sig)
    try:
        # A work product: one read copies and hashes it, and the copy is verified, before the
        # one transaction that records the version and publishes the copy under its number.
        with backup_staged(workspace=workspace, path=key[1], fd=fd) as staged:
            if signature(os.fstat(fd)) != sig:
                return _changed_while_read(settle_ns)
            with transaction.atomic():
                version, created = _record(workspace, parts, staged.size, staged.sha256, actor)
                backed_up = not backup_present(version)
                if backed_up:
                    backup_record(version=version, location=staged.publish(version.number), actor=actor)
    except BackupFailed as exc:
        logger.warning("%s; recording it without a backup, the next reconcile tries again", exc)
        return _record_without_backup(workspace, parts, fd, sig, settle_ns, actor)
    _remember(memory, key, sig, version.sha256, read_at, before)
    return Observed(
        RECORDED if created else UNCHANGED,
        version=version,
        backup_location=version.backup_location,
        signature=sig,
        backed_up=backed_up,
    )


def _record(workspace, parts, size: int, sha256: str, actor: Actor) -> tuple[ArtifactVersion, bool]:
    """Caller holds a transaction."""
    _, version, created = artifact_record_version(
        actor=actor, workspace=workspace, parts=parts, size=size, sha256=sha256, source=Artifact.Source.OBSERVER
    )
    return version, created


def _record_without_backup(workspace, parts, fd: int, sig: Signature, settle_ns: int, actor: Actor) -> Observed:
    size, sha256 = hash_fd(fd)
    if signature(os.fstat(fd)) != sig:
        return _changed_while_read(settle_ns)
    with transaction.atomic():
        version, created = _record(workspace, parts, size, sha256, actor)
    return Observed(RECORDED if created else UNCHANGED, version=version, signature=sig)


def _changed_while_read(settle_ns: int) -> Observed:
    return Observed(BUSY, retry_in=max(settle_ns, 1_000_000) / 1e9)


def _remember(memory, key, sig, sha256, read_at: int, st: os.stat_result) -> None:
    if memory is not None and read_at - st.st_ctime_ns >= QUIET_NS:
        memory.remember(key, sig, sha256)


# --- Where a path belongs ---------------------------------------------------------------------


@dataclass(frozen=True)
class Located:
    workspace: Workspace
    parts: tuple[str, ...]


@dataclass(frozen=True)
class Unregistered:
    folder: str


def candidate_parts(relative: str) -> tuple[str, tuple[str, ...]] | None:
    """(folder, path inside it) for a path relative to WORKSPACE_ROOT that may be an artifact."""
    components = relative.split("/")
    if len(components) < 2 or any(not c or c.startswith(".") for c in components):
        return None
    return components[0], tuple(components[1:])


def layout_accepts(workspace: Workspace, parts: tuple[str, ...]) -> bool:
    if workspace.kind == Workspace.Kind.SHARED:
        return len(parts) == 1
    return workspace.kind == Workspace.Kind.SESSION and len(parts) > 1 and parts[0] in SESSION_FOLDERS


class WorkspaceDirectory:
    """Which folder under ``WORKSPACE_ROOT`` is which registered workspace.

    Answers are cached for a few seconds (a folder is made just before its row commits, so a
    miss is asked again soon); thread-safe. ``default`` is the shared workspace by definition
    and is registered on first sight, as ``workspace_shared`` does for the API.
    """

    HIT_SECONDS = 5.0
    MISS_SECONDS = 0.5

    def __init__(self, root: Path | None = None) -> None:
        self.root = Path(root or settings.WORKSPACE_ROOT)
        self._cache: dict[str, tuple[float, Workspace | None]] = {}
        self._warned: set[str] = set()
        self._lock = threading.Lock()

    def workspace(self, folder: str) -> Workspace | None:
        now = time.monotonic()
        with self._lock:
            cached = self._cache.get(folder)
        if cached is not None and cached[0] > now:
            return cached[1]
        workspace = workspace_for_folder(root=self.root, folder=folder)
        ttl = self.HIT_SECONDS if workspace is not None else self.MISS_SECONDS
        with self._lock:
            self._cache[folder] = (now + ttl, workspace)
        return workspace

    def locate(self, path: str) -> Located | Unregistered | None:
        """Where an absolute path under the root belongs; None when it is not an artifact's."""
        root = str(self.root)
        if not path.startswith(root + os.sep):
            return None
        found = candidate_parts(path[len(root) + 1 :])
        if found is None:
            return None
        folder, parts = found
        workspace = self.workspace(folder)
        if workspace is None:
            return Unregistered(folder)
        if not layout_accepts(workspace, parts):
            return None
        try:
            clean = clean_relative("/".join(parts), flat=workspace.kind == Workspace.Kind.SHARED)
        except UnsafePath as exc:
            logger.info("skipped %s: %s", path, exc.reason)
            return None
        return Located(workspace, clean)

    def warn_unregistered(self, folder: str) -> None:
        """Log once per folder: it is not a registered workspace, so nothing in it is recorded."""
        with self._lock:
            if folder in self._warned:
                return
            self._warned.add(folder)
        logger.warning("ignoring %s: not a registered workspace", self.root / folder)


def workspace_for_folder(*, root: Path, folder: str) -> Workspace | None:
    """The active session or shared workspace whose folder is ``root/folder``, if any."""
    path = root / folder
    if path.is_symlink() or not path.is_dir():
        return None
    candidates = {str(path), os.path.realpath(path)}
    workspace = Workspace.objects.filter(root_path__in=candidates, kind__in=OBSERVED_KINDS).first()
    if workspace is None and folder == settings.SHARED_WORKSPACE_NAME and root == Path(settings.WORKSPACE_ROOT):
        workspace = workspace_shared()
    if workspace is None or workspace.status != Workspace.Status.ACTIVE:
        return None
    return workspace


# --- The reconcile pass ----------------------------------------------------------------------


@dataclass
class ReconcileReport:
    workspaces: int = 0
    files: int = 0
    recorded: int = 0
    backed_up: int = 0
    unchanged: int = 0
    busy: int = 0
    gone: int = 0
    skipped: int = 0
    ignored_folders: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> dict:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


_ignored_logged: set[str] = set()


def workspace_reconcile(
    *,
    settle_ns: int | None = None,
    memory: FileMemory | None = None,
    defer: Callable[[str], None] | None = None,
    progress: Callable[[int], None] | None = None,
    actor: Actor = SYSTEM,
) -> ReconcileReport:
    """Bring the database in line with every registered workspace folder under WORKSPACE_ROOT.

    Records a version for every file whose bytes differ from its latest version and backs up
    work products whose latest version has no backup. Files changed within ``settle_ns``
    (default: the larger of OBSERVER_SETTLE_MS and RECONCILE_QUIET_NS) may still be open for
    writing: they are counted as busy and handed to ``defer`` or left for the next pass.
    Folders that are not registered workspaces are ignored. Idempotent; safe beside a running
    observer or a second reconcile.
    """
    started = time.monotonic()
    if settle_ns is None:
        settle_ns = max(settings.OBSERVER_SETTLE_MS * 1_000_000, RECONCILE_QUIET_NS)
    report = ReconcileReport()
    root = Path(settings.WORKSPACE_ROOT)
    if not root.is_dir():
        return report
    directory = WorkspaceDirectory(root)
    with os.scandir(root) as entries:
        folders = sorted(e.name for e in entries if not e.name.startswith(".") and e.is_dir(follow_symlinks=False))
    for folder in folders:
        workspace = directory.workspace(folder)
        if workspace is None:
            report.ignored_folders.append(folder)
            if folder not in _ignored_logged:
                _ignored_logged.add(folder)
                logger.warning("reconcile ignores %s: not a registered workspace", root / folder)
            continue
        report.workspaces += 1
        _reconcile_one(
            workspace=workspace,
            settle_ns=settle_ns,
            memory=memory,
            defer=defer,
            progress=progress,
            actor=actor,
            report=report,
        )
    report.seconds = time.monotonic() - started
    return report


def _reconcile_one(*, workspace, settle_ns, memory, defer, progress, actor, report: ReconcileReport) -> None:
    latest = _latest_by_path(workspace)
    root = Path(workspace.root_path)
    flat = workspace.kind == Workspace.Kind.SHARED
    for found in workspace_files(workspace):
        report.files += 1
        if progress is not None:
            progress(report.files)
        try:
            parts = clean_relative("/".join(found), flat=flat)
            observed = artifact_observe(
                workspace=workspace,
                parts=parts,
                settle_ns=settle_ns,
                memory=memory,
                latest=latest.get("/".join(parts)),
                actor=actor,
            )
        except (DomainError, OSError) as exc:
            logger.warning("reconcile skipped %s in %s: %s", "/".join(found), root, getattr(exc, "message", exc))
            report.skipped += 1
            continue
        if observed.outcome == BUSY:
            report.busy += 1
            if defer is not None:
                defer(str(root.joinpath(*parts)))
            continue
        setattr(report, observed.outcome, getattr(report, observed.outcome) + 1)
        report.backed_up += observed.backed_up


def _latest_by_path(workspace: Workspace) -> dict[str, Latest]:
    """Every artifact's latest bytes and whether that version has a backup: one query."""
    latest_backup = (
        ArtifactVersion.objects.filter(artifact=OuterRef("pk")).order_by("-number").values("backup_location")[:1]
    )
    rows = (
        Artifact.objects.filter(workspace=workspace)
        .annotate(latest_backup=Subquery(latest_backup))
        .values_list("path", "size", "sha256", "latest_backup")
    )
    return {path: Latest(size, sha256, bool(backup)) for path, size, sha256, backup in rows}


def workspace_files(workspace: Workspace) -> Iterator[tuple[str, ...]]:
    """The paths of a workspace's candidate files, without following any symbolic link."""
    root = Path(workspace.root_path)
    if workspace.kind == Workspace.Kind.SHARED:
        yield from ((name,) for name in files_below(root, recursive=False))
        return
    for sub in SESSION_FOLDERS:
        folder = root / sub
        if folder.is_symlink() or not folder.is_dir():
            continue
        for relative in files_below(folder, recursive=True):
            yield (sub, *relative.split("/"))


def files_below(folder: Path, *, recursive: bool, prefix: str = "") -> Iterator[str]:
    """Relative paths of the regular files in ``folder``: no symbolic links, no dot names."""
    try:
        with os.scandir(folder) as scan:
            entries = sorted(scan, key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return
    for entry in entries:
        if entry.name.startswith("."):
            continue
        try:
            mode = entry.stat(follow_symlinks=False).st_mode
        except FileNotFoundError:
            continue
        relative = f"{prefix}{entry.name}"
        if stat.S_ISREG(mode):
            yield relative
        elif stat.S_ISDIR(mode) and recursive:
            yield from files_below(Path(entry.path), recursive=True, prefix=f"{relative}/")
        elif stat.S_ISLNK(mode):
            logger.debug("skipped symbolic link %s", entry.path)
