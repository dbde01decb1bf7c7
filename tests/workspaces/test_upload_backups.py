"""Every version of a work product written through the API is backed up as it is written:
the next write may replace the file before any observer reads it."""

import hashlib
from pathlib import Path

import pytest

from config.actors import SYSTEM
from ledger.models import Event
from workspaces.files.reconcile import workspace_reconcile
from workspaces.files.services import artifact_write, workspace_create_for_session, workspace_shared
from workspaces.models import ArtifactVersion

pytestmark = pytest.mark.django_db

FOLDER = "session_20260101_120000_abcd1234"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def session_ws(file_roots):
    return workspace_create_for_session(folder_name=FOLDER)


def backups_on_disk(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_each_version_of_a_work_product_gets_its_verified_backup_at_upload(session_ws, file_roots):
    # when the same path is written twice, the second write replacing the first at once
    written = [
        artifact_write(actor=SYSTEM, workspace=session_ws, path="work_products/r/report.md", chunks=[data])[1]
        for data in (b"draft one\n", b"draft two\n")
    ]

    # then each version has its own backup with its own bytes, recorded with its event
    root = file_roots["SAVED_REPORTS_ROOT"]
    assert backups_on_disk(root) == {
        f"{FOLDER}/r/report.md.v1": b"draft one\n",
        f"{FOLDER}/r/report.md.v2": b"draft two\n",
    }
    versions = ArtifactVersion.objects.order_by("number")
    assert [(v.number, v.backup_location) for v in versions] == [
        (1, str(root / FOLDER / "r" / "report.md.v1")),
        (2, str(root / FOLDER / "r" / "report.md.v2")),
    ]
    events = Event.objects.filter(name="artifact.backed_up").order_by("id")
    assert [(e.payload["version"], e.payload["sha256"]) for e in events] == [
        (1, sha(b"draft one\n")),
        (2, sha(b"draft two\n")),
    ]
    assert [v.pk for v in written] == [v.pk for v in versions]


def test_the_same_bytes_again_add_no_version_and_no_backup(session_ws, file_roots):
    for _ in range(2):
        artifact_write(actor=SYSTEM, workspace=session_ws, path="work_products/a.md", chunks=[b"same"])

    assert list(backups_on_disk(file_roots["SAVED_REPORTS_ROOT"])) == [f"{FOLDER}/a.md.v1"]
    assert (ArtifactVersion.objects.count(), Event.objects.filter(name="artifact.backed_up").count()) == (1, 1)


def test_other_session_folders_are_not_backed_up(session_ws, file_roots):
    _, version, _ = artifact_write(actor=SYSTEM, workspace=session_ws, path="search_results/q.json", chunks=[b"{}"])

    assert version.backup_location == ""
    assert backups_on_disk(file_roots["SAVED_REPORTS_ROOT"]) == {}
    assert not Event.objects.filter(name="artifact.backed_up").exists()


def test_a_shared_workspace_file_is_a_work_product_and_is_backed_up(file_roots):
    _, version, _ = artifact_write(actor=SYSTEM, workspace=workspace_shared(), path="notes.txt", chunks=[b"hi"])

    assert version.backup_location == str(file_roots["SAVED_REPORTS_ROOT"] / "default" / "notes.txt.v1")
    assert Path(version.backup_location).read_bytes() == b"hi"


def test_the_reconcile_finds_nothing_left_to_back_up(session_ws, file_roots):
    artifact_write(actor=SYSTEM, workspace=session_ws, path="work_products/a.md", chunks=[b"one"])
    artifact_write(actor=SYSTEM, workspace=session_ws, path="work_products/a.md", chunks=[b"two"])
    before = backups_on_disk(file_roots["SAVED_REPORTS_ROOT"])

    report = workspace_reconcile(settle_ns=0)

    assert (report.recorded, report.backed_up, report.unchanged) == (0, 0, 1)
    assert backups_on_disk(file_roots["SAVED_REPORTS_ROOT"]) == before
    assert Event.objects.filter(name="artifact.backed_up").count() == 2


def test_where_the_kernel_copy_is_refused_a_plain_copy_is_made_and_verified(session_ws, file_roots, monkeypatch):
    import errno
    import os

    def refuse(*args, **kwargs):
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "copy_file_range", refuse)
    data = b"x" * (3 * 1024 * 1024 + 17)  # more than one copy chunk

    version = artifact_write(actor=SYSTEM, workspace=session_ws, path="work_products/big.bin", chunks=[data])[1]

    version.refresh_from_db()
    assert Path(version.backup_location).read_bytes() == data


def test_a_copy_that_reads_back_different_bytes_is_not_recorded(session_ws, file_roots, monkeypatch):
    from workspaces.files import backups

    def corrupt(fd, tmp_name, dir_fd):
        size = real(fd, tmp_name, dir_fd)
        with open(os.open(tmp_name, os.O_WRONLY, dir_fd=dir_fd), "wb") as out:
            out.write(b"!")
        return size

    import os

    real = backups._copy_unhashed
    monkeypatch.setattr(backups, "_copy_unhashed", corrupt)

    version = artifact_write(actor=SYSTEM, workspace=session_ws, path="work_products/r.md", chunks=[b"the report\n"])[1]

    # the upload stands; its version has no backup, and no half copy is left behind
    version.refresh_from_db()
    assert version.backup_location == ""
    assert backups_on_disk(file_roots["SAVED_REPORTS_ROOT"]) == {}
    assert (Path(session_ws.root_path) / "work_products" / "r.md").read_bytes() == b"the report\n"
