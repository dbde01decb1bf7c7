"""Workspace folders and the artifacts in them."""

import contextlib
import logging
import mimetypes
import os
import uuid
from collections.abc import Iterable
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from config.actors import Actor
from config.api.errors import DomainError
from config.safepaths import clean_relative, open_file_beneath, parent_descriptor, resolve_under_roots
from ledger.events import event_record
from ledger.models import Event, ToolInvocation
from workspaces.files.backups import BackupFailed, artifact_version_backup, backup_wanted
from workspaces.files.uploads import StagedFile, staged_file
from workspaces.models import Artifact, ArtifactVersion, Workspace

logger = logging.getLogger(__name__)

SESSION_FOLDERS = ("search_results", "work_products", "workbench_activity", "media")
FOLDER_KINDS = {
    "work_products": Artifact.Kind.WORK_PRODUCT,
    "search_results": Artifact.Kind.SEARCH_RESULT,
    "media": Artifact.Kind.MEDIA,
    "workbench_activity": Artifact.Kind.LOG,
}
CODE_SUFFIXES = {
    ".py",
    ".js",
    ".ts",
    ".tsx",
    ".go",
    ".rs",
    ".java",
    ".rb",
    ".c",
    ".h",
    ".cpp",
    ".sh",
    ".sql",
    ".html",
    ".css",
}
NOTE_SUFFIXES = {".md", ".txt", ".rst"}


def workspace_folder_name() -> str:
    return f"session_{timezone.now():%Y%m%d_%H%M%S}_{uuid.uuid4().hex[:8]}"


def workspace_create_for_session(*, folder_name: str | None = None) -> Workspace:
    """A new session folder with its four sub-folders. The name is the server's choice."""
    root = Path(settings.WORKSPACE_ROOT)
    root.mkdir(parents=True, exist_ok=True)
    path = root / (folder_name or workspace_folder_name())
    path.mkdir(mode=0o755)
    for sub in SESSION_FOLDERS:
        (path / sub).mkdir(mode=0o755)
    return Workspace.objects.create(kind=Workspace.Kind.SESSION, root_path=str(path))


def workspace_discard_empty(*, workspace: Workspace) -> None:
    """Remove a session folder that was made for a session that was never stored.

    Only empty folders go (``rmdir``): a file in it means someone used it, so it stays.
    """
    path = Path(workspace.root_path)
    for sub in SESSION_FOLDERS:
        with contextlib.suppress(OSError):
            (path / sub).rmdir()
    with contextlib.suppress(OSError):
        path.rmdir()


def workspace_shared() -> Workspace:
    """The flat shared workspace ``WORKSPACE_ROOT/default/``, made on first use."""
    path = Path(settings.WORKSPACE_ROOT) / settings.SHARED_WORKSPACE_NAME
    path.mkdir(parents=True, exist_ok=True)
    try:
        with transaction.atomic():
            workspace, _ = Workspace.objects.get_or_create(
                root_path=str(path), defaults={"kind": Workspace.Kind.SHARED}
            )
    except IntegrityError:
        workspace = Workspace.objects.get(root_path=str(path))
    return workspace


def artifact_kind_for(parts: tuple[str, ...], *, shared: bool) -> str:
    if not shared and len(parts) > 1 and parts[0] in FOLDER_KINDS:
        return FOLDER_KINDS[parts[0]]
    suffix = os.path.splitext(parts[-1])[1].lower()
    if suffix in CODE_SUFFIXES:
        return Artifact.Kind.CODE
    if suffix in NOTE_SUFFIXES:
        return Artifact.Kind.NOTE
    if suffix == ".log":
        return Artifact.Kind.LOG
    mime = mimetypes.guess_type(parts[-1])[0] or ""
    if mime.startswith(("image/", "audio/", "video/")):
        return Artifact.Kind.MEDIA
    if shared and (suffix in {".pdf", ".docx", ".xlsx", ".pptx", ".csv", ".json"}):
        return Artifact.Kind.WORK_PRODUCT
    return Artifact.Kind.OTHER


def artifact_write(
    *,
    actor: Actor,
    workspace: Workspace,
    path: str,
    chunks: Iterable[bytes],
    tool_invocation: ToolInvocation | None = None,
    source: str = Artifact.Source.API,
) -> tuple[Artifact, ArtifactVersion, bool]:
    """Write a file into the workspace and record it; True when a new version was added.

    The bytes go to a temporary file beside the destination (fsynced, sha256 on the way);
    the version row is written and the file renamed into place in one transaction, so a
    failure leaves neither. Writing the same bytes as the latest version adds nothing.
    """
    if workspace.status != Workspace.Status.ACTIVE:
        raise DomainError(f"The workspace is {workspace.status}.", code="conflict")
    shared = workspace.kind == Workspace.Kind.SHARED
    parts = clean_relative(path, flat=shared)
    with (
        staged_file(
            root=Path(workspace.root_path), parts=parts, chunks=chunks, max_bytes=settings.FILE_UPLOAD_MAX_BYTES
        ) as staged,
        transaction.atomic(),
    ):
        artifact, version, created = artifact_record_version(
            actor=actor,
            workspace=workspace,
            parts=parts,
            size=staged.size,
            sha256=staged.sha256,
            source=source,
            tool_invocation=tool_invocation,
        )
        if created:
            _upload_backup(actor=actor, workspace=workspace, parts=parts, version=version, staged=staged)
            # Last step before commit: if the rename fails, the version row rolls back with it.
            staged.publish()
    return artifact, version, created


def _upload_backup(
    *, actor: Actor, workspace: Workspace, parts: tuple[str, ...], version: ArtifactVersion, staged: StagedFile
) -> None:
    """Back up a new work-product version from the staged bytes, in the upload's transaction.

    Not left to the observer: the next upload may replace the file before any observer reads
    it, and that version's bytes would be gone. A copy that fails is logged and the upload
    still succeeds; its version has no backup location, so the reconcile tries again (while the
    file still holds those bytes).
    """
    if not backup_wanted(workspace=workspace, parts=parts):
        return
    fd = staged.open_for_read()
    try:
        artifact_version_backup(version=version, workspace=workspace, fd=fd, actor=actor)
    except BackupFailed as exc:
        logger.warning("%s; the upload is kept without a backup, the next reconcile tries again", exc)
    finally:
        os.close(fd)


def artifact_record_version(
    *,
    actor: Actor,
    workspace: Workspace,
    parts: tuple[str, ...],
    size: int,
    sha256: str,
    source: str,
    tool_invocation: ToolInvocation | None = None,
) -> tuple[Artifact, ArtifactVersion, bool]:
    """Record that the file at ``parts`` now has these bytes; True when that is a new version.

    Caller holds a transaction. The artifact row is locked while its next version number
    is taken, so concurrent writers of one path get distinct numbers. The same bytes as the
    latest version add nothing, but a tool call named for them is linked: the observer often
    records a file before the hook that wrote it uploads it.
    """
    shared = workspace.kind == Workspace.Kind.SHARED
    logical = "/".join(parts)
    artifact, _ = _artifact_locked(workspace=workspace, path=logical, kind=artifact_kind_for(parts, shared=shared))
    latest = artifact.versions.order_by("-number").first()
    if latest is not None and latest.sha256 == sha256 and latest.size == size:
        if tool_invocation is not None and artifact.tool_invocation_id != tool_invocation.pk:
            _artifact_link(actor=actor, artifact=artifact, version=latest, tool_invocation=tool_invocation)
        return artifact, latest, False
    number = (latest.number if latest else 0) + 1
    version = ArtifactVersion.objects.create(artifact=artifact, number=number, size=size, sha256=sha256, source=source)
    artifact.size = size
    artifact.sha256 = sha256
    artifact.mime_type = mimetypes.guess_type(parts[-1])[0] or "application/octet-stream"
    artifact.source = source
    if tool_invocation is not None:
        artifact.tool_invocation = tool_invocation
    artifact.save(update_fields=["size", "sha256", "mime_type", "source", "tool_invocation", "updated_at"])
    event_record(
        name="artifact.created",
        subject_type="artifact",
        subject_id=artifact.pk,
        actor=actor.label,
        payload={
            "workspace": workspace.pk,
            "path": logical,
            "version": number,
            "sha256": sha256,
            "size": size,
            "source": source,
            "tool_call": tool_invocation.pk if tool_invocation else None,
        },
    )
    return artifact, version, True


def _artifact_link(
    *, actor: Actor, artifact: Artifact, version: ArtifactVersion, tool_invocation: ToolInvocation
) -> None:
    """Say that this tool call wrote the artifact's current bytes. Caller holds its row lock."""
    artifact.tool_invocation = tool_invocation
    artifact.save(update_fields=["tool_invocation", "updated_at"])
    event_record(
        name="artifact.linked",
        subject_type="artifact",
        subject_id=artifact.pk,
        actor=actor.label,
        payload={
            "workspace": artifact.workspace_id,
            "path": artifact.path,
            "version": version.number,
            "tool_call": tool_invocation.pk,
        },
    )


def _artifact_locked(*, workspace: Workspace, path: str, kind: str) -> tuple[Artifact, bool]:
    """The artifact row for this path, locked for the version count (created if new)."""
    artifact = Artifact.objects.select_for_update().filter(workspace=workspace, path=path).first()
    if artifact is not None:
        return artifact, False
    try:
        with transaction.atomic():
            return Artifact.objects.create(workspace=workspace, path=path, kind=kind), True
    except IntegrityError:
        return Artifact.objects.select_for_update().get(workspace=workspace, path=path), False


def artifact_open(*, workspace: Workspace, path: str) -> tuple[int, int, str]:
    """An open descriptor for a workspace file, its size, and its logical path."""
    parts = clean_relative(path, flat=workspace.kind == Workspace.Kind.SHARED)
    try:
        fd = open_file_beneath(Path(workspace.root_path), parts)
    except FileNotFoundError:
        raise DomainError(f"No file at {path!r}.", code="not_found") from None
    return fd, os.fstat(fd).st_size, "/".join(parts)


def artifact_export(
    *, actor: Actor, artifact: Artifact, destination: str, overwrite: bool = False
) -> tuple[Path, str, int]:
    """Copy the artifact's current file to ``destination`` inside one of ``EXPORT_ROOTS``.

    Atomic (temporary file, then rename or link) and never overwrites unless asked.
    Returns the file written, its sha256 and size.
    """
    root, parts = resolve_under_roots(destination, [Path(p) for p in settings.EXPORT_ROOTS])
    root.mkdir(parents=True, exist_ok=True)
    fd, size, logical = artifact_open(workspace=artifact.workspace, path=artifact.path)
    with os.fdopen(fd, "rb") as source:
        chunks = iter(lambda: source.read(1024 * 1024), b"")
        with staged_file(root=root, parts=parts, chunks=chunks, max_bytes=settings.FILE_UPLOAD_MAX_BYTES) as staged:
            with parent_descriptor(root, parts) as dir_fd:
                exists = _exists(parts[-1], dir_fd)
            if exists and not overwrite:
                raise DomainError(
                    f'{destination} already exists; pass "overwrite": true to replace it.', code="conflict"
                )
            if exists:
                _check_may_replace(actor=actor, target=root.joinpath(*parts), destination=destination)
            # Only a file found and checked above is replaced: one that appears meanwhile is a 409.
            staged.publish(replace=exists)
    target = root.joinpath(*parts)
    event_record(
        name="artifact.exported",
        subject_type="artifact",
        subject_id=artifact.pk,
        actor=actor.label,
        payload={"destination": str(target), "sha256": staged.sha256, "size": staged.size, "overwrite": overwrite},
    )
    return target, staged.sha256, staged.size


def _check_may_replace(*, actor: Actor, target: Path, destination: str) -> None:
    """``overwrite`` replaces only a file this agent exported there last (the ledger's
    ``artifact.exported`` events say who); staff may replace anything. Anything else is a 409:
    another agent's export, or a file Switchyard never wrote."""
    if actor.is_staff:
        return
    last = (
        Event.objects.filter(name="artifact.exported", payload__destination=str(target))
        .order_by("-id")
        .values_list("actor", flat=True)
        .first()
    )
    if last != actor.label:
        raise DomainError(
            f"{destination} was not exported by you; overwrite replaces only a file you exported (or staff's).",
            code="conflict",
        )


def _exists(name: str, dir_fd: int) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True
