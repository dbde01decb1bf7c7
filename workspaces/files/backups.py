"""Backups of work products: every version's bytes copied to ``SAVED_REPORTS_ROOT``.

Layout: ``SAVED_REPORTS_ROOT/<workspace folder>/<path>.v<N>``, where the workspace folder is
the session folder's name (``session_<ts>_<uuid8>``) or ``default`` for the flat shared
workspace, and ``<path>`` is the artifact's path without its leading ``work_products/``
(every backup is a work product, so the folder adds nothing). Every version keeps its own
file; ``.v<N>`` is always the last suffix, so no two artifacts' backups can share a name.

The copy is made the way ``files.staged_file`` writes uploads (a temporary name beside the
destination, opened with O_EXCL and O_NOFOLLOW beneath a directory descriptor, fsynced,
renamed, the folder fsynced), with one difference: the copy is made, and read back to
verify it, *before* the version is recorded, because its name carries the version number
that recording decides. So the bytes backed up are exactly the bytes hashed (a file rewritten
a moment later cannot leave a version without its backup), and the rename and the
``backup_location`` are written in the same transaction as the version.
"""

import hashlib
import logging
import os
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.db import transaction

from config.actors import SYSTEM, Actor
from config.api.errors import DomainError
from config.safepaths import open_file_beneath, parent_descriptor
from ledger.events import event_record
from workspaces.files.uploads import CHUNK_BYTES, hash_fd
from workspaces.models import ArtifactVersion, Workspace

logger = logging.getLogger(__name__)

WORK_PRODUCTS = "work_products"


class BackupFailed(Exception):
    """The copy could not be made or did not verify; the version keeps no backup location."""


def backup_parts(*, workspace: Workspace, path: str, number: int) -> tuple[str, ...]:
    """Where version ``number`` of ``path`` goes, relative to ``SAVED_REPORTS_ROOT``."""
    folder, name = _backup_place(workspace, path)
    return (*folder, f"{name}.v{number}")


def _backup_place(workspace: Workspace, path: str) -> tuple[tuple[str, ...], str]:
    parts = tuple(path.split("/"))
    if workspace.kind == Workspace.Kind.SESSION and len(parts) > 1 and parts[0] == WORK_PRODUCTS:
        parts = parts[1:]
    return (Path(workspace.root_path).name, *parts[:-1]), parts[-1]


def backup_wanted(*, workspace: Workspace, parts: tuple[str, ...]) -> bool:
    """Work products are backed up: a session's ``work_products/`` and all of the shared workspace."""
    if workspace.kind == Workspace.Kind.SHARED:
        return True
    return workspace.kind == Workspace.Kind.SESSION and len(parts) > 1 and parts[0] == WORK_PRODUCTS


@dataclass
class StagedBackup:
    """A verified copy beside its backup folder's other versions, under a temporary name."""

    size: int
    sha256: str
    _dir_fd: int = field(repr=False)
    _tmp_name: str = field(repr=False)
    _folder: tuple[str, ...] = field(repr=False)
    _name: str = field(repr=False)
    location: str | None = None

    def publish(self, number: int) -> str:
        """Rename it to ``<name>.v<number>``; returns the location. Replaces a copy left by a
        run whose transaction rolled back (the number was free again, so it was not recorded)."""
        final = f"{self._name}.v{number}"
        try:
            os.rename(self._tmp_name, final, src_dir_fd=self._dir_fd, dst_dir_fd=self._dir_fd)
            os.fsync(self._dir_fd)
        except OSError as exc:
            raise BackupFailed(f"backup {final}: {exc}") from exc
        self.location = str(Path(settings.SAVED_REPORTS_ROOT).joinpath(*self._folder, final))
        return self.location


@contextmanager
def backup_staged(
    *, workspace: Workspace, path: str, fd: int, expected_sha256: str | None = None
) -> Iterator[StagedBackup]:
    """Copy the open file ``fd`` (from offset 0) into its backup folder under a temporary name,
    hashing on the way; fsync it and read it back. Removed on exit unless published.

    With ``expected_sha256`` (an upload, hashed as it arrived) the copy is made by the kernel
    without hashing the source, and the read-back must match that hash instead.
    Raises BackupFailed when the folder cannot be used (a symlink in it, no space, ...)."""
    root = Path(settings.SAVED_REPORTS_ROOT)
    folder, name = _backup_place(workspace, path)
    tmp_name = f".{name[:200]}.{uuid.uuid4().hex}.part"
    with ExitStack() as cleanup:
        try:
            root.mkdir(parents=True, exist_ok=True)
            dir_fd = cleanup.enter_context(parent_descriptor(root, (*folder, name), create=True))
            staged = StagedBackup(size=0, sha256="", _dir_fd=dir_fd, _tmp_name=tmp_name, _folder=folder, _name=name)
            cleanup.callback(_discard, staged)
            if expected_sha256 is None:
                staged.size, staged.sha256 = _copy(fd, tmp_name, dir_fd)
                verified = _read_back(tmp_name, dir_fd) == staged.sha256
            else:
                staged.size = _copy_unhashed(fd, tmp_name, dir_fd)
                staged.sha256 = _read_back(tmp_name, dir_fd)
                verified = staged.sha256 == expected_sha256
        except (OSError, DomainError) as exc:
            raise BackupFailed(f"backup of {path}: {getattr(exc, 'message', exc)}") from exc
        if not verified:
            raise BackupFailed(f"the copy of {path} did not read back the same")
        yield staged


def _discard(staged: StagedBackup) -> None:
    if staged.location is None:
        with suppress(FileNotFoundError):
            os.unlink(staged._tmp_name, dir_fd=staged._dir_fd)


def _copy(fd: int, tmp_name: str, dir_fd: int) -> tuple[int, str]:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    out = os.open(tmp_name, flags, 0o644, dir_fd=dir_fd)
    try:
        digest = hashlib.sha256()
        size = _copy_loop(fd, out, digest)
        os.fsync(out)
    finally:
        os.close(out)
    return size, digest.hexdigest()


def _copy_loop(fd: int, out: int, digest=None) -> int:
    """Read ``fd`` from its start and write it to ``out`` at its position, hashing into ``digest`` if given."""
    offset = 0
    while chunk := os.pread(fd, CHUNK_BYTES, offset):
        if digest is not None:
            digest.update(chunk)
        view = memoryview(chunk)
        while view:
            view = view[os.write(out, view) :]
        offset += len(chunk)
    return offset


def _copy_unhashed(fd: int, tmp_name: str, dir_fd: int) -> int:
    """Copy in the kernel (copy_file_range; a plain loop where the filesystems refuse), fsynced."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    out = os.open(tmp_name, flags, 0o644, dir_fd=dir_fd)
    try:
        offset = 0
        try:
            while copied := os.copy_file_range(fd, out, 64 * CHUNK_BYTES, offset, offset):
                offset += copied
        except OSError:
            # copy_file_range with offsets leaves the file position at 0: the loop writes from there.
            os.ftruncate(out, 0)
            offset = _copy_loop(fd, out)
        os.fsync(out)
    finally:
        os.close(out)
    return offset


def _read_back(name: str, dir_fd: int) -> str:
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        return hash_fd(fd)[1]
    finally:
        os.close(fd)


def backup_record(*, version: ArtifactVersion, location: str, actor: Actor = SYSTEM) -> bool:
    """Set the version's backup location and log ``artifact.backed_up``; False if it was set already.

    Caller holds a transaction (the one that published the copy). Conditional, so two
    observers that backed up the same version record it once.
    """
    changed = (
        ArtifactVersion.objects.filter(pk=version.pk).exclude(backup_location=location).update(backup_location=location)
    )
    version.backup_location = location
    if changed:
        event_record(
            name="artifact.backed_up",
            subject_type="artifact",
            subject_id=version.artifact_id,
            actor=actor.label,
            payload={
                "workspace": version.artifact.workspace_id,
                "path": version.artifact.path,
                "version": version.number,
                "version_id": version.pk,
                "location": location,
                "sha256": version.sha256,
                "size": version.size,
            },
        )
    return bool(changed)


def backup_present(version: ArtifactVersion) -> bool:
    return bool(version.backup_location) and os.path.isfile(version.backup_location)


def artifact_version_backup(
    *, version: ArtifactVersion, workspace: Workspace | None = None, fd: int | None = None, actor: Actor = SYSTEM
) -> str | None:
    """Back up an already recorded version (an API upload, one whose backup failed); its location.

    ``fd`` is an open descriptor of the workspace file (read from offset 0, left open); without
    it the file is opened here. None when the file no longer holds this version's bytes: they
    are gone, and the version that replaced them gets its own backup. Idempotent: a version
    whose backup is recorded and on disk is left alone. Raises BackupFailed.
    """
    if backup_present(version):
        return version.backup_location
    artifact = version.artifact
    workspace = workspace or artifact.workspace
    own_fd = fd is None
    if own_fd:
        try:
            fd = open_file_beneath(Path(workspace.root_path), tuple(artifact.path.split("/")))
        except (OSError, DomainError) as exc:
            logger.info("backup of %s v%d skipped: %s", artifact.path, version.number, exc)
            return None
    try:
        # An upload's descriptor holds exactly the version's bytes (hashed as they arrived).
        expected = None if own_fd else version.sha256
        with backup_staged(workspace=workspace, path=artifact.path, fd=fd, expected_sha256=expected) as staged:
            if (staged.size, staged.sha256) != (version.size, version.sha256):
                logger.info("backup of %s v%d skipped: the file has changed since", artifact.path, version.number)
                return None
            with transaction.atomic():
                backup_record(version=version, location=staged.publish(version.number), actor=actor)
    finally:
        if own_fd:
            os.close(fd)
    return version.backup_location
