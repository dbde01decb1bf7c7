"""Builders shared by the archive and restore tests: folders worth archiving, a snapshot of a
folder to compare before and after, and hand-made (malicious) archives.

``archive_storage`` (autouse, once imported: ``archive_storage_fixture``) points ``storages["archives"]`` at the test's ARCHIVE_ROOT: STORAGES is read
once at start, before tests/conftest.py moves the roots into a temporary folder.
"""

import hashlib
import io
import json
import os
import stat
import tarfile
from datetime import timedelta
from pathlib import Path

import pytest
import zstandard
from django.utils import timezone

from sessions_app.models import AgentSession
from tests.factories import SessionFactory
from workspaces.archive.format import FORMAT
from workspaces.files.services import workspace_create_for_session
from workspaces.models import Workspace


@pytest.fixture(name="archive_storage", autouse=True)
def archive_storage_fixture(settings, file_roots) -> Path:
    root = file_roots["ARCHIVE_ROOT"]
    settings.STORAGES = {
        **settings.STORAGES,
        "archives": {"BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(root)}},
    }
    return root


def ended_session_workspace(*, days_ago: float, agent=None, **workspace_fields) -> Workspace:
    """A session workspace whose one session ended ``days_ago`` days ago, with a file in it."""
    workspace = workspace_create_for_session()
    if workspace_fields:
        Workspace.objects.filter(pk=workspace.pk).update(**workspace_fields)
        workspace.refresh_from_db()
    ended = timezone.now() - timedelta(days=days_ago)
    extra = {"agent": agent} if agent is not None else {}
    SessionFactory(workspace=workspace, status=AgentSession.Status.COMPLETED, started_at=ended, ended_at=ended, **extra)
    (Path(workspace.root_path) / "work_products" / "report.md").write_text("# Report\n")
    age(workspace, days=days_ago)
    return workspace


def age(workspace: Workspace, *, days: float) -> None:
    """Make the row look untouched for ``days`` days (retention also waits on updated_at)."""
    Workspace.objects.filter(pk=workspace.pk).update(updated_at=timezone.now() - timedelta(days=days))


def fill_tree(root: Path, *, outside: Path) -> None:
    """Everything a workspace folder may hold: nested folders, text and binary files, an empty
    file and folder, odd modes, a read-only folder, a non-ASCII name, symlinks inside, dangling
    and pointing outside (absolute and relative), a setuid file and a fifo."""
    (root / "work_products" / "deep" / "deeper").mkdir(parents=True, exist_ok=True)
    (root / "work_products" / "report.md").write_text("# Report\n\nAll good.\n" * 50)
    (root / "work_products" / "deep" / "deeper" / "data.bin").write_bytes(os.urandom(300_000) + bytes(70_000))
    (root / "work_products" / "empty.txt").write_bytes(b"")
    (root / "empty-folder").mkdir()
    (root / "résumé – notes.txt").write_text("non-ASCII name\n")
    (root / "run.sh").write_text("#!/bin/sh\necho hi\n")
    os.chmod(root / "run.sh", 0o755)
    (root / "private.txt").write_text("secret-ish\n")
    os.chmod(root / "private.txt", 0o600)
    (root / "setuid-tool").write_bytes(b"\x7fELF fake")
    os.chmod(root / "setuid-tool", 0o4755)
    (root / "sealed").mkdir()
    (root / "sealed" / "inside.txt").write_text("in a read-only folder\n")
    os.chmod(root / "sealed", 0o555)
    os.symlink("work_products/report.md", root / "link-inside")
    os.symlink("work_products/deep", root / "link-to-folder")
    os.symlink("missing-target", root / "dangling")
    outside.mkdir(parents=True, exist_ok=True)
    (outside / "outside.txt").write_text("must never be archived or touched\n")
    os.symlink(str(outside / "outside.txt"), root / "link-out-absolute")
    os.symlink("../../outside-rel", root / "work_products" / "link-out-relative")
    os.mkfifo(root / "a-fifo")


def tree_state(root: Path) -> dict[str, tuple]:
    """Every name under ``root`` (not following symlinks): type, permission bits and bytes or target."""
    state = {}
    for folder, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(folder) / name
            info = os.lstat(path)
            relative = str(path.relative_to(root))
            bits = stat.S_IMODE(info.st_mode)
            if stat.S_ISLNK(info.st_mode):
                state[relative] = ("symlink", os.readlink(path))
            elif stat.S_ISDIR(info.st_mode):
                state[relative] = ("dir", bits)
            elif stat.S_ISREG(info.st_mode):
                state[relative] = ("file", bits, path.read_bytes())
            else:
                state[relative] = ("other", bits)
    return state


def without_setuid(state: dict[str, tuple]) -> dict[str, tuple]:
    """What a restore gives back: no setuid/setgid/sticky bits, no fifo."""
    restored = {}
    for path, value in state.items():
        if value[0] == "other":
            continue
        if value[0] in ("file", "dir"):
            value = (value[0], value[1] & 0o777, *value[2:])
        restored[path] = value
    return restored


# --- Hand-made archives --------------------------------------------------------------------------


def member(name: str, *, kind: bytes = tarfile.REGTYPE, data: bytes = b"", mode: int = 0o644, link: str = ""):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.linkname = link
    info.size = len(data) if kind in (tarfile.REGTYPE, tarfile.AREGTYPE) else 0
    if kind in (tarfile.CHRTYPE, tarfile.BLKTYPE):
        info.devmajor, info.devminor = 1, 3
    return info, data


def entry(name: str, *, kind: str = "file", data: bytes = b"", mode: int = 0o644, target: str = "") -> dict:
    item = {"path": name, "type": kind, "mode": mode, "mtime": 1_700_000_000}
    if kind == "file":
        item.update(size=len(data), sha256=hashlib.sha256(data).hexdigest())
    if kind == "symlink":
        item["target"] = target
    return item


def planted_archive(workspace: Workspace, storage_root: Path, *, members: list, entries: list[dict]) -> None:
    """Store a hand-made tar.zst and manifest for ``workspace`` and record them as its verified
    archive (sha256s and all), so only what is inside can make a restore refuse it."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if info.size else None)
    archive = zstandard.ZstdCompressor().compress(raw.getvalue())
    manifest = json.dumps(
        {"format": FORMAT, "compression": "zstd", "root_mode": 0o755, "entries": entries, "skipped": []}
    ).encode()
    name = f"workspace-{workspace.pk}-planted.tar.zst"
    (storage_root / name).write_bytes(archive)
    (storage_root / name.replace(".tar.zst", ".manifest.json")).write_bytes(manifest)
    Workspace.objects.filter(pk=workspace.pk).update(
        status=Workspace.Status.ARCHIVED,
        archive_location=name,
        archive_size=len(archive),
        archive_sha256=hashlib.sha256(archive).hexdigest(),
        archive_manifest_sha256=hashlib.sha256(manifest).hexdigest(),
        archive_verified_at=timezone.now(),
    )
    workspace.refresh_from_db()


class Killed(BaseException):
    """Stands in for SIGKILL in unit tests: not an Exception, so nothing catches it on the way.
    (The claim is still released by ``finally``; the worker tests kill for real.)"""


@pytest.fixture(name="queued_tasks")
def queued_tasks_fixture(monkeypatch) -> list[tuple[str, tuple, dict]]:
    """Records the archive tasks' ``.delay`` calls instead of sending them to a broker. They are
    made after commit: run the request inside ``django_capture_on_commit_callbacks(execute=True)``."""
    from workspaces import tasks as archive_tasks

    calls: list[tuple[str, tuple, dict]] = []
    for name in ("workspace_archive_task", "workspace_restore_task"):
        task = getattr(archive_tasks, name)
        monkeypatch.setattr(task, "delay", lambda *a, _name=name, **kw: calls.append((_name, a, kw)))
    return calls
