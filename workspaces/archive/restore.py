"""Restore: an archived workspace's folder comes back, exactly as it was archived.

The manifest is trusted only when its sha256 is the one recorded when the archive was
verified; it is then validated whole (``manifest_parse``) before anything is written, so an
absolute name, ``..``, a path through a symlink, a hard link, a device node or a setuid bit
refuses the archive at once. The archive is then streamed into a temporary folder beside the
workspace's: every member must be the manifest's next entry (path, type, mode, size, link
target) and every file match its sha256. Only then is each file synced, the folder renamed
into place, the workspace marked active and ``workspace.restored`` recorded.

Nothing is written outside the temporary folder: every folder on the way is one this run
made, opened with ``O_NOFOLLOW``, and files are created with ``O_EXCL | O_NOFOLLOW``. A
symlink comes back as the same link, whatever it points to (the archiver stored it and
never followed it); nothing is read or written through it. Setuid, setgid and sticky bits
are never stored, so never restored.

Stricter than tarfile's ``filter='data'``, with one difference: a symlink whose target lies
outside the folder is restored as it was archived (``data`` would refuse it), since the
manifest that lists it is authenticated by the database and a worktree's config links are
exactly such links.
"""

import os
import shutil
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from config.actors import Actor
from config.api.errors import DomainError
from config.safepaths import DIR_FLAGS
from config.side_effects import enqueue_task
from ledger.events import event_record
from workspaces.archive.format import (
    ArchiveInvalid,
    Entry,
    Manifest,
    Member,
    archive_read,
    folder_entries,
    same_content,
)
from workspaces.archive.services import (
    ClaimLost,
    archive_claim,
    archive_claim_release,
    folder_open,
    folder_remove,
    stored_manifest,
)
from workspaces.archive.storage import fsync_folder, glob_escape, stored_exists, stored_open
from workspaces.models import Workspace

WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class RestoreOutcome:
    workspace_id: int
    outcome: str  # restored | already_active | busy
    files: int = 0
    bytes: int = 0

    def as_dict(self) -> dict:
        return asdict(self)


def workspace_restore_request(*, actor: Actor, workspace_id: int) -> tuple[Workspace, bool]:
    """Ask for a restore (API and admin): staff only. True when a restore was queued; False
    when the workspace is active already (nothing to do)."""
    if not actor.is_staff:
        raise DomainError("Only staff restore archived workspaces.", code="forbidden")
    workspace = Workspace.objects.filter(pk=workspace_id).first()
    if workspace is None:
        raise DomainError(f"No workspace {workspace_id}.", code="not_found")
    if workspace.status == Workspace.Status.REMOVED:
        raise DomainError(f"Workspace {workspace_id} was removed; there is nothing to restore.", code="conflict")
    if workspace.status == Workspace.Status.ACTIVE:
        if workspace.archive_claimed_by or workspace.archive_verified_at is not None:
            raise DomainError(
                f"Workspace {workspace_id} is being archived; restore it once that is done.", code="conflict"
            )
        return workspace, False
    if not workspace.archive_location or not workspace.archive_manifest_sha256:
        raise DomainError(f"Workspace {workspace_id} has no recorded archive to restore from.", code="conflict")
    # By name: the task module imports this one, never the other way round.
    enqueue_task("workspaces.tasks.workspace_restore_task", workspace.pk, actor_label=actor.label)
    return workspace, True


def workspace_restore(*, workspace_id: int, actor_label: str = "system") -> RestoreOutcome:
    """Restore the archived workspace's folder. Idempotent: an active workspace is a no-op,
    and a run killed after the rename finds the folder in place, checks it and finishes."""
    token = uuid.uuid4().hex
    if not archive_claim(workspace_id=workspace_id, token=token, status=Workspace.Status.ARCHIVED):
        workspace = Workspace.objects.filter(pk=workspace_id).first()
        if workspace is None:
            raise DomainError(f"No workspace {workspace_id}.", code="not_found")
        if workspace.status == Workspace.Status.REMOVED:
            raise DomainError(f"Workspace {workspace_id} was removed.", code="conflict")
        return RestoreOutcome(workspace_id, "already_active" if workspace.status == "active" else "busy")
    try:
        workspace = Workspace.objects.get(pk=workspace_id)
        manifest = stored_manifest(workspace)
        root = Path(workspace.root_path)
        if os.path.lexists(root):
            _adopt_existing(root=root, manifest=manifest)
        else:
            _extract_into_place(workspace=workspace, manifest=manifest, token=token)
        return _mark_restored(workspace=workspace, token=token, manifest=manifest, actor_label=actor_label)
    finally:
        archive_claim_release(workspace_id=workspace_id, token=token)


def _adopt_existing(*, root: Path, manifest: Manifest) -> None:
    """A folder is already where the workspace goes: a run killed after its rename left it. It
    is taken only if it holds exactly what was archived; anything else is left alone."""
    with folder_open(root) as root_fd:
        if not same_content(folder_entries(root_fd), manifest.entries):
            raise DomainError(
                f"{root} exists and is not the archived folder; move it away and restore again.", code="conflict"
            )


def _extract_into_place(*, workspace: Workspace, manifest: Manifest, token: str) -> None:
    root = Path(workspace.root_path)
    root.parent.mkdir(parents=True, exist_ok=True)
    for stale in root.parent.glob(f".{glob_escape(root.name)}.restoring-*"):
        folder_remove(stale)  # a killed run's; never renamed into place, so never trusted
    free = shutil.disk_usage(root.parent).free
    if manifest.total_bytes > free:
        raise DomainError(f"Restoring needs {manifest.total_bytes} bytes; {free} are free.", code="conflict")
    if not stored_exists(workspace.archive_location):
        raise ArchiveInvalid(f"the storage has no {workspace.archive_location!r}")
    temporary = root.with_name(f".{root.name}.restoring-{token}")
    os.mkdir(temporary, 0o700)
    try:
        with folder_open(temporary) as temporary_fd:
            writer = _Extractor(temporary_fd)
            try:
                with stored_open(workspace.archive_location) as source:
                    # No sha256 of the stored bytes: every member is checked against the manifest,
                    # which the database authenticates, so what is written is what was archived.
                    stored = archive_read(source=source, manifest=manifest, visit=writer.visit, hash_stored=False)
                if stored.size != workspace.archive_size:
                    raise ArchiveInvalid("the stored archive is not the one that was verified when it was archived")
                writer.finish(root_mode=manifest.root_mode)
            finally:
                writer.close()
        os.rename(temporary, root)
        fsync_folder(root.parent)
    except BaseException:
        folder_remove(temporary)
        raise


class _Extractor:
    """Writes the archive's members under the temporary folder, in archive order.

    The manifest was validated first, so each member's folder is one made earlier in this run;
    it is still opened from the top with ``O_NOFOLLOW`` at every step.
    """

    def __init__(self, root_fd: int):
        self._root_fd = root_fd
        self._folders: list[Entry] = []
        self._cached: tuple[str, int] | None = None
        self._flusher = _Flusher()

    def visit(self, member: Member, entry: Entry, content) -> None:
        parent, _, name = entry.path.rpartition("/")
        dir_fd = self._folder(parent)
        mtime_ns = entry.mtime * 1_000_000_000
        if entry.type == "dir":
            os.mkdir(name, 0o700, dir_fd=dir_fd)  # opened up to its mode once its contents are in
            self._folders.append(entry)
        elif entry.type == "symlink":
            os.symlink(entry.target, name, dir_fd=dir_fd)
            os.utime(name, ns=(mtime_ns, mtime_ns), dir_fd=dir_fd, follow_symlinks=False)
        else:
            fd = os.open(name, WRITE_FLAGS, 0o600, dir_fd=dir_fd)
            try:
                for piece in content:
                    while piece:
                        piece = piece[os.write(fd, piece) :]
                os.fchmod(fd, entry.mode)
                os.utime(fd, ns=(mtime_ns, mtime_ns))
            except BaseException:
                os.close(fd)
                raise
            self._flusher.fsync_and_close(fd)

    def finish(self, *, root_mode: int) -> None:
        """Every file on disk; then folder modes and mtimes, deepest first (a read-only folder
        is filled before it closes), each folder synced too."""
        self._close_cached()
        self._flusher.wait()
        for entry in reversed(self._folders):
            fd = _open_beneath(self._root_fd, entry.path)
            try:
                os.fchmod(fd, entry.mode)
                os.utime(fd, ns=(entry.mtime * 1_000_000_000,) * 2)
                os.fsync(fd)
            finally:
                os.close(fd)
        os.fchmod(self._root_fd, root_mode)
        os.fsync(self._root_fd)

    def close(self) -> None:
        """Release descriptors and threads, whatever happened (``finish`` reports errors)."""
        self._close_cached()
        self._flusher.wait(raise_errors=False)

    def _close_cached(self) -> None:
        if self._cached is not None:
            os.close(self._cached[1])
            self._cached = None

    def _folder(self, path: str) -> int:
        if not path:
            return self._root_fd
        if self._cached is not None and self._cached[0] == path:
            return self._cached[1]
        self._close_cached()
        self._cached = (path, _open_beneath(self._root_fd, path))
        return self._cached[1]


class _Flusher:
    """fsyncs restored files in a few threads while extraction goes on.

    An fsync per file, rather than one ``sync()``, flushes only what this restore wrote and
    reports a write error against it; threads let the filesystem batch them into few journal
    commits. At most ``PENDING`` files wait open, so a slow disk cannot run out of descriptors.
    """

    WORKERS = 4
    PENDING = 64

    def __init__(self):
        self._pool: ThreadPoolExecutor | None = None
        self._slots = threading.BoundedSemaphore(self.PENDING)
        self._futures: list = []

    def fsync_and_close(self, fd: int) -> None:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.WORKERS, thread_name_prefix="restore-fsync")
        self._slots.acquire()
        try:
            self._futures.append(self._pool.submit(self._flush, fd))
        except BaseException:
            self._slots.release()
            os.close(fd)
            raise
        if len(self._futures) > 4 * self.PENDING:
            self._futures = [future for future in self._futures if not future.done() or future.exception()]

    def _flush(self, fd: int) -> None:
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
            self._slots.release()

    def wait(self, *, raise_errors: bool = True) -> None:
        if self._pool is None:
            return
        self._pool.shutdown(wait=True)
        self._pool = None
        futures, self._futures = self._futures, []
        for future in futures:
            if raise_errors and future.exception() is not None:
                raise future.exception()


def _open_beneath(root_fd: int, path: str) -> int:
    fd = os.dup(root_fd)
    try:
        for part in path.split("/"):
            next_fd = os.open(part, DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = next_fd
    except BaseException:
        os.close(fd)
        raise
    return fd


def _mark_restored(*, workspace: Workspace, token: str, manifest: Manifest, actor_label: str) -> RestoreOutcome:
    files = sum(1 for entry in manifest.entries if entry.type == "file")
    with transaction.atomic():
        rows = Workspace.objects.filter(pk=workspace.pk, status=Workspace.Status.ARCHIVED, archive_claimed_by=token)
        # updated_at moves: retention counts a restored workspace's time from its restore.
        if not rows.update(
            status=Workspace.Status.ACTIVE,
            archive_verified_at=None,
            archive_claimed_by="",
            archive_claimed_until=None,
            updated_at=timezone.now(),
        ):
            raise ClaimLost(workspace.pk)
        event_record(
            name="workspace.restored",
            subject_type="workspace",
            subject_id=workspace.pk,
            actor=actor_label,
            payload={"location": workspace.archive_location, "files": files, "bytes": manifest.total_bytes},
        )
    return RestoreOutcome(workspace.pk, "restored", files=files, bytes=manifest.total_bytes)
