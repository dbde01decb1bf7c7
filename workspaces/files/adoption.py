"""Adopting an existing folder as a workspace: its files are registered, never moved or changed."""

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from django.db import transaction

from config.actors import Actor
from config.api.errors import DomainError
from config.safepaths import UnsafePath, clean_relative, open_file_beneath
from workspaces.files.services import SESSION_FOLDERS, artifact_record_version
from workspaces.files.uploads import hash_fd
from workspaces.models import Artifact, Workspace


@dataclass
class AdoptionReport:
    workspace: Workspace
    created: bool
    registered: int = 0  # new versions recorded
    unchanged: int = 0
    skipped: list[str] = field(default_factory=list)  # with the reason


def _candidate_files(root: Path, *, flat: bool) -> Iterator[tuple[str, str | None]]:
    """(relative path, reason to skip or None) for every entry that looks like a file."""
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        relative_dir = os.path.relpath(dirpath, root)
        if flat and relative_dir != ".":
            dirnames.clear()
            continue
        dirnames.sort()
        for name in sorted(filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]):
            relative = name if relative_dir == "." else f"{relative_dir}/{name}"
            if name.endswith(".part") and name.startswith("."):
                yield relative, "an unfinished upload"
            elif os.path.islink(os.path.join(dirpath, name)):
                yield relative, "a symbolic link"
            else:
                yield relative, None
        if flat:
            for name in dirnames:
                yield f"{name}/", "a sub-folder (the flat layout keeps files at its root)"
            dirnames.clear()


def workspace_adopt(*, actor: Actor, folder: Path, progress: Callable[[int], None] | None = None) -> AdoptionReport:
    """Register ``folder`` and its files. A folder with any of the session sub-folders is a
    session workspace; otherwise it has the flat layout of the shared workspace. Running
    it again records only files whose bytes changed."""
    if not folder.is_absolute():
        raise DomainError("The folder must be an absolute path.")
    if folder.is_symlink() or not folder.is_dir():
        raise DomainError(f"{folder} is not a folder (or is a symbolic link).")
    root = Path(os.path.realpath(folder))
    is_session = any((root / sub).is_dir() for sub in SESSION_FOLDERS)
    kind = Workspace.Kind.SESSION if is_session else Workspace.Kind.SHARED
    workspace, created = Workspace.objects.get_or_create(root_path=str(root), defaults={"kind": kind})
    report = AdoptionReport(workspace=workspace, created=created)
    flat = workspace.kind == Workspace.Kind.SHARED
    for index, (relative, reason) in enumerate(_candidate_files(root, flat=flat), start=1):
        if progress is not None:
            progress(index)
        if reason is not None:
            report.skipped.append(f"{relative}: {reason}")
            continue
        try:
            parts = clean_relative(relative, flat=flat)
            fd = open_file_beneath(root, parts)
        except (UnsafePath, OSError) as exc:
            report.skipped.append(f"{relative}: {getattr(exc, 'reason', exc)}")
            continue
        try:
            size, sha256 = hash_fd(fd)
        finally:
            os.close(fd)
        with transaction.atomic():
            _, _, added = artifact_record_version(
                actor=actor, workspace=workspace, parts=parts, size=size, sha256=sha256, source=Artifact.Source.SYNC
            )
        if added:
            report.registered += 1
        else:
            report.unchanged += 1
    return report
