"""Archival: a finished workspace's folder becomes a verified archive, and only then goes.

The steps, each safe to be killed after (SPEC §7, "Archived means verified"):

1. claim the row with a conditional update on a lease: never two workers on one workspace;
2. stream the folder into ``<name>.tar.zst`` (or ``.tar.gz``) and its manifest into
   ``<name>.manifest.json``, each under a temporary name, synced, then renamed;
3. re-read both from storage: every member matches the manifest and every file its sha256;
   then check the folder has not changed since it was read (names, sizes, mtimes, ctimes);
4. record location, size, sha256s and ``archive_verified_at``; the status stays active;
5. rename the folder to a tombstone beside it and delete that, never following a symlink;
6. mark the workspace archived and record ``workspace.archived`` in one transaction.

Killed before 4, the folder is intact (a stale ``.part`` file is removed by the next run).
Killed after 4, the database names an archive that was verified; the next run re-reads it,
checks it again and finishes 5 and 6.
"""

import hashlib
import os
import shutil
import stat
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from config.actors import Actor
from config.api.errors import DomainError
from config.safepaths import DIR_FLAGS
from config.side_effects import enqueue_task
from ledger.events import event_record
from sessions_app.models import AgentSession
from workspaces.archive.format import (
    SUFFIXES,
    ArchiveInvalid,
    FolderChanged,
    Manifest,
    Progress,
    archive_read,
    archive_write,
    folder_entries,
    folder_snapshot,
    manifest_parse,
    same_content,
)
from workspaces.archive.storage import (
    fsync_folder,
    stored_atomically,
    stored_exists,
    stored_open,
    stored_parts_remove,
    stored_read,
)
from workspaces.models import Workspace, Worktree

MANIFEST_SUFFIX = ".manifest.json"
MANIFEST_MAX_BYTES = 256 * 1024 * 1024
# The claim outlives the hard time limit: a running task is killed before its lease lapses.
LEASE_MARGIN_SECONDS = 300
LEASE_RENEW_SECONDS = 60
ARCHIVABLE_KINDS = (Workspace.Kind.SESSION, Workspace.Kind.WORKTREE)


@dataclass(frozen=True)
class ArchiveOutcome:
    workspace_id: int
    outcome: str  # archived | already_archived | busy | refused
    reason: str = ""
    location: str = ""
    size: int | None = None
    files: int = 0
    bytes: int = 0

    def as_dict(self) -> dict:
        return asdict(self)


class ClaimLost(DomainError):
    def __init__(self, workspace_id: int):
        super().__init__(f"The claim on workspace {workspace_id} lapsed and another run took it.", code="conflict")


# --- Claims: one worker per workspace --------------------------------------------------------


def archive_claim(*, workspace_id: int, token: str, status: str, condition: Q | None = None) -> bool:
    """Claim the row for archival or restore; True when this call got it.

    One conditional UPDATE: the row must have ``status``, meet ``condition`` and have no
    live claim. ``updated_at`` is left alone: a claim is not a change to the workspace.
    """
    now = timezone.now()
    lease = now + timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT + LEASE_MARGIN_SECONDS)
    free = Q(archive_claimed_until__isnull=True) | Q(archive_claimed_until__lt=now)
    rows = Workspace.objects.filter(free, pk=workspace_id, status=status)
    if condition is not None:
        rows = rows.filter(condition)
    return rows.update(archive_claimed_by=token, archive_claimed_until=lease) == 1


def archive_claim_renew(*, workspace_id: int, token: str) -> None:
    lease = timezone.now() + timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT + LEASE_MARGIN_SECONDS)
    if not Workspace.objects.filter(pk=workspace_id, archive_claimed_by=token).update(archive_claimed_until=lease):
        raise ClaimLost(workspace_id)


def archive_claim_release(*, workspace_id: int, token: str) -> None:
    Workspace.objects.filter(pk=workspace_id, archive_claimed_by=token).update(
        archive_claimed_by="", archive_claimed_until=None
    )


def archivable() -> Q:
    """Never the shared workspace, never one with an open session or a held worktree."""
    open_sessions = AgentSession.objects.filter(workspace=OuterRef("pk"), ended_at__isnull=True)
    held = Worktree.objects.filter(workspace=OuterRef("pk"), holder__isnull=False)
    return Q(kind__in=ARCHIVABLE_KINDS) & ~Exists(open_sessions) & ~Exists(held)


def archive_refusal(*, workspace: Workspace) -> str | None:
    """Why this workspace may not be archived now, or None."""
    if workspace.kind not in ARCHIVABLE_KINDS:
        return "The shared workspace is never archived."
    if workspace.status != Workspace.Status.ACTIVE:
        return f"The workspace is {workspace.status}."
    open_session = workspace.sessions.filter(ended_at__isnull=True).values_list("pk", flat=True).first()
    if open_session is not None:
        return f"Session {open_session} is still open in it."
    holder = Worktree.objects.filter(workspace=workspace, holder__isnull=False).values_list("holder__slug", flat=True)
    holder = holder.first()
    if holder is not None:
        return f"Its worktree is held by {holder}."
    return None


def workspace_archive_request(*, actor: Actor, workspace: Workspace) -> None:
    """Queue an archive now, whatever the retention (the admin's "Archive now"): staff only."""
    if not actor.is_staff:
        raise DomainError("Only staff archive workspaces by hand.", code="forbidden")
    reason = archive_refusal(workspace=workspace)
    if reason is not None:
        raise DomainError(reason, code="conflict")
    # By name: the task module imports this one, never the other way round.
    enqueue_task("workspaces.tasks.workspace_archive_task", workspace.pk, actor_label=actor.label)


# --- Archive ----------------------------------------------------------------------------------


def workspace_archive(*, workspace_id: int, actor_label: str = "system", progress: Progress | None = None):
    """Archive the workspace now (retention is the caller's business: see archive_retention).

    Idempotent: an archived workspace is left alone; one a killed run left half done is
    finished. Returns an ArchiveOutcome; raises FolderChanged or ArchiveInvalid (the folder
    stays) and DomainError for a state that needs a person.
    """
    token = uuid.uuid4().hex
    if not archive_claim(
        workspace_id=workspace_id, token=token, status=Workspace.Status.ACTIVE, condition=archivable()
    ):
        return _unclaimed(workspace_id)
    try:
        workspace = Workspace.objects.get(pk=workspace_id)
        renew = _renewer(workspace_id, token, progress)
        manifest = _verified_archive_if_any(workspace=workspace, token=token)
        if manifest is None:
            manifest = _archive_and_verify(workspace=workspace, token=token, renew=renew)
        renew(0, 0, force=True)
        folder_remove(Path(workspace.root_path), tombstone=tombstone_path(workspace))
        return _mark_archived(workspace=workspace, token=token, manifest=manifest, actor_label=actor_label)
    finally:
        archive_claim_release(workspace_id=workspace_id, token=token)


def _unclaimed(workspace_id: int) -> ArchiveOutcome:
    workspace = Workspace.objects.filter(pk=workspace_id).first()
    if workspace is None:
        raise DomainError(f"No workspace {workspace_id}.", code="not_found")
    if workspace.status == Workspace.Status.ARCHIVED:
        return ArchiveOutcome(workspace_id, "already_archived", location=workspace.archive_location)
    reason = archive_refusal(workspace=workspace)
    if reason is not None:
        return ArchiveOutcome(workspace_id, "refused", reason=reason)
    return ArchiveOutcome(workspace_id, "busy", reason="Another worker is archiving or restoring it.")


def _archive_and_verify(*, workspace: Workspace, token: str, renew) -> Manifest:
    archive_name = archive_name_for(workspace)
    manifest_name = manifest_name_for(archive_name)
    stored_parts_remove(archive_name)
    stored_parts_remove(manifest_name)
    with folder_open(Path(workspace.root_path)) as root_fd:
        with stored_atomically(archive_name) as sink:
            written = archive_write(
                root_fd=root_fd, sink=sink, compression=settings.ARCHIVE_COMPRESSION, progress=renew
            )
        manifest_bytes = written.manifest.to_bytes()
        with stored_atomically(manifest_name) as sink:
            sink.write(manifest_bytes)
        manifest_sha256 = hashlib.sha256(manifest_bytes).hexdigest()
        renew(0, 0, force=True)
        # Step 3: trust nothing that was not read back from the storage.
        manifest = _manifest_from_storage(manifest_name, manifest_sha256)
        with stored_open(archive_name) as source:
            stored = archive_read(source=source, manifest=manifest)
        if folder_snapshot(root_fd) != written.snapshot:
            raise FolderChanged("a name was added, removed or changed after it was read")
    now = timezone.now()
    recorded = Workspace.objects.filter(pk=workspace.pk, status=Workspace.Status.ACTIVE, archive_claimed_by=token)
    if not recorded.update(
        archive_location=archive_name,
        archive_size=stored.size,
        archive_sha256=stored.sha256,
        archive_manifest_sha256=manifest_sha256,
        archive_verified_at=now,
    ):
        raise ClaimLost(workspace.pk)
    workspace.archive_location, workspace.archive_size, workspace.archive_sha256 = (
        archive_name,
        stored.size,
        stored.sha256,
    )
    return manifest


def _verified_archive_if_any(*, workspace: Workspace, token: str) -> Manifest | None:
    """A run killed after step 4: the manifest of the verified archive, checked again; or None
    when the folder is still whole and the job should start over (the marker is cleared)."""
    if workspace.archive_verified_at is None:
        return None
    root = Path(workspace.root_path)
    try:
        manifest = stored_manifest(workspace)
        stored_archive_check(workspace=workspace, manifest=manifest)
    except ArchiveInvalid as exc:
        if not _is_folder(root):
            raise DomainError(
                f"Workspace {workspace.pk}: its verified archive no longer verifies ({exc.reason}) and its folder "
                "is partly deleted; a person must look at it.",
                code="conflict",
            ) from None
        _verified_clear(workspace=workspace, token=token)
        return None
    if _is_folder(root):
        # Killed between steps 4 and 5: delete only if the folder still holds what was archived.
        with folder_open(root) as root_fd:
            if not same_content(folder_entries(root_fd), manifest.entries):
                _verified_clear(workspace=workspace, token=token)
                return None
    return manifest


def _verified_clear(*, workspace: Workspace, token: str) -> None:
    Workspace.objects.filter(pk=workspace.pk, archive_claimed_by=token).update(archive_verified_at=None)


def _mark_archived(*, workspace: Workspace, token: str, manifest: Manifest, actor_label: str) -> ArchiveOutcome:
    files = sum(1 for entry in manifest.entries if entry.type == "file")
    with transaction.atomic():
        done = Workspace.objects.filter(pk=workspace.pk, status=Workspace.Status.ACTIVE, archive_claimed_by=token)
        if not done.update(
            status=Workspace.Status.ARCHIVED,
            archive_claimed_by="",
            archive_claimed_until=None,
            updated_at=timezone.now(),
        ):
            raise ClaimLost(workspace.pk)
        event_record(
            name="workspace.archived",
            subject_type="workspace",
            subject_id=workspace.pk,
            actor=actor_label,
            payload={
                "location": workspace.archive_location,
                "size": workspace.archive_size,
                "sha256": workspace.archive_sha256,
                "files": files,
                "bytes": manifest.total_bytes,
                "skipped": len(manifest.skipped),
            },
        )
    return ArchiveOutcome(
        workspace.pk,
        "archived",
        location=workspace.archive_location,
        size=workspace.archive_size,
        files=files,
        bytes=manifest.total_bytes,
    )


def _renewer(workspace_id: int, token: str, progress: Progress | None):
    """Passes progress on, and renews the lease now and then, so a long run keeps its claim."""
    renewed = time.monotonic()

    def report(files: int, done_bytes: int, *, force: bool = False) -> None:
        nonlocal renewed
        if force or time.monotonic() - renewed > LEASE_RENEW_SECONDS:
            archive_claim_renew(workspace_id=workspace_id, token=token)
            renewed = time.monotonic()
        if progress is not None and not force:
            progress(files, done_bytes)

    return report


# --- Stored archives, shared with restore ------------------------------------------------------


def archive_name_for(workspace: Workspace) -> str:
    return f"workspace-{workspace.pk}-{Path(workspace.root_path).name}{SUFFIXES[settings.ARCHIVE_COMPRESSION]}"


def manifest_name_for(archive_name: str) -> str:
    for suffix in SUFFIXES.values():
        if archive_name.endswith(suffix):
            return archive_name[: -len(suffix)] + MANIFEST_SUFFIX
    return archive_name + MANIFEST_SUFFIX


def _manifest_from_storage(name: str, sha256: str) -> Manifest:
    if not stored_exists(name):
        raise ArchiveInvalid(f"the storage has no manifest {name!r}")
    raw = stored_read(name, max_bytes=MANIFEST_MAX_BYTES)
    if hashlib.sha256(raw).hexdigest() != sha256:
        raise ArchiveInvalid("the stored manifest is not the one recorded when the archive was verified")
    return manifest_parse(raw)


def stored_manifest(workspace: Workspace) -> Manifest:
    """The manifest of the workspace's archive, trusted only if its sha256 is the recorded one."""
    if not workspace.archive_location or not workspace.archive_manifest_sha256:
        raise ArchiveInvalid(f"workspace {workspace.pk} has no recorded archive")
    return _manifest_from_storage(manifest_name_for(workspace.archive_location), workspace.archive_manifest_sha256)


def stored_archive_check(*, workspace: Workspace, manifest: Manifest) -> None:
    """Re-read the recorded archive: every member and sha256 as in the manifest, and the stored
    bytes those that were verified at archive time."""
    if not stored_exists(workspace.archive_location):
        raise ArchiveInvalid(f"the storage has no {workspace.archive_location!r}")
    with stored_open(workspace.archive_location) as source:
        stored = archive_read(source=source, manifest=manifest)
    if (stored.size, stored.sha256) != (workspace.archive_size, workspace.archive_sha256):
        raise ArchiveInvalid("the stored archive is not the one that was verified")


# --- Folders ----------------------------------------------------------------------------------


@contextmanager
def folder_open(path: Path) -> Iterator[int]:
    """A descriptor for the workspace folder; refuses a symlink in its place."""
    try:
        fd = os.open(path, DIR_FLAGS)
    except FileNotFoundError:
        raise DomainError(f"The folder {path} is missing.", code="conflict") from None
    except OSError as exc:
        raise DomainError(f"The folder {path} cannot be opened ({exc.strerror}).", code="conflict") from None
    try:
        yield fd
    finally:
        os.close(fd)


def _is_folder(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def tombstone_path(workspace: Workspace) -> Path:
    root = Path(workspace.root_path)
    return root.with_name(f".{root.name}.archived-deleting")


def folder_remove(path: Path, *, tombstone: Path | None = None) -> None:
    """Delete a folder and everything in it, never following a symlink.

    With ``tombstone``, the folder is first renamed to it, so its name is gone at once and a
    run killed halfway leaves the tombstone (which the next run removes), never a half-empty
    workspace folder.
    """
    if tombstone is not None:
        if os.path.lexists(tombstone):
            _rmtree(tombstone)
        if not os.path.lexists(path):
            return
        os.rename(path, tombstone)
        fsync_folder(tombstone.parent)
        path = tombstone
    if os.path.lexists(path):
        _rmtree(path)


def _rmtree(path: Path) -> None:
    if os.path.islink(path):
        os.unlink(path)  # rmtree refuses a symlink; the link goes, its target stays
        return

    def open_up_and_retry(function, failed, _exc_info):
        # A folder archived without write or search permission (0o500, 0o000) keeps its names
        # until it is opened up. lstat first: chmod follows symlinks, and a symlink is left as is.
        for folder in (os.path.dirname(failed), failed):
            with suppress(OSError):
                if stat.S_ISDIR(os.lstat(folder).st_mode):
                    os.chmod(folder, stat.S_IRWXU)
        if stat.S_ISDIR(os.lstat(failed).st_mode):
            shutil.rmtree(failed, onerror=open_up_and_retry)
        else:
            os.unlink(failed)

    shutil.rmtree(path, onerror=open_up_and_retry)
