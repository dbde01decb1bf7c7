"""Backups of work-product versions in SAVED_REPORTS_ROOT: verified, one file per version."""

import hashlib
from pathlib import Path

import pytest
from django.db import transaction

from config.actors import SYSTEM
from ledger.models import Event
from workspaces.files.backups import BackupFailed, artifact_version_backup, backup_parts
from workspaces.files.services import artifact_record_version, workspace_create_for_session, workspace_shared
from workspaces.models import ArtifactVersion
from workspaces.tasks import artifact_backup_task

pytestmark = pytest.mark.django_db


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_version(workspace, relative: str, data: bytes) -> ArtifactVersion:
    """Put ``data`` at ``relative`` in the workspace and record it, as the observer does."""
    path = Path(workspace.root_path) / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    with transaction.atomic():
        _, version, _ = artifact_record_version(
            actor=SYSTEM,
            workspace=workspace,
            parts=tuple(relative.split("/")),
            size=len(data),
            sha256=sha(data),
            source="observer",
        )
    return version


@pytest.fixture
def workspace(db):
    return workspace_create_for_session(folder_name="session_20260101_120000_abcd1234")


def test_a_work_product_version_is_copied_verified_and_recorded(workspace, file_roots):
    # given
    version = write_version(workspace, "work_products/reports/q3.md", b"# Q3\n")

    # when
    location = artifact_version_backup(version=version)

    # then
    expected = file_roots["SAVED_REPORTS_ROOT"] / "session_20260101_120000_abcd1234" / "reports" / "q3.md.v1"
    assert location == str(expected)
    assert sha(expected.read_bytes()) == version.sha256
    assert ArtifactVersion.objects.get(pk=version.pk).backup_location == str(expected)
    event = Event.objects.get(name="artifact.backed_up")
    assert event.payload == {
        "workspace": workspace.pk,
        "path": "work_products/reports/q3.md",
        "version": 1,
        "version_id": version.pk,
        "location": str(expected),
        "sha256": version.sha256,
        "size": 5,
    }
    assert [p.name for p in expected.parent.iterdir()] == ["q3.md.v1"]  # no temporary left


def test_every_version_keeps_its_own_backup(workspace, file_roots):
    first = write_version(workspace, "work_products/report.md", b"one")
    artifact_version_backup(version=first)
    second = write_version(workspace, "work_products/report.md", b"two")

    artifact_version_backup(version=second)

    folder = file_roots["SAVED_REPORTS_ROOT"] / "session_20260101_120000_abcd1234"
    assert (folder / "report.md.v1").read_bytes() == b"one"
    assert (folder / "report.md.v2").read_bytes() == b"two"
    assert list(ArtifactVersion.objects.order_by("number").values_list("backup_location", flat=True)) == [
        str(folder / "report.md.v1"),
        str(folder / "report.md.v2"),
    ]


def test_backing_up_twice_changes_nothing(workspace):
    version = write_version(workspace, "work_products/report.md", b"same")
    first = artifact_version_backup(version=version)

    again = artifact_version_backup(version=ArtifactVersion.objects.get(pk=version.pk))

    assert again == first
    assert Event.objects.filter(name="artifact.backed_up").count() == 1


def test_a_lost_backup_file_is_made_again(workspace):
    version = write_version(workspace, "work_products/report.md", b"keep me")
    location = artifact_version_backup(version=version)
    Path(location).unlink()

    again = artifact_version_backup(version=ArtifactVersion.objects.get(pk=version.pk))

    assert again == location
    assert Path(location).read_bytes() == b"keep me"


def test_a_file_that_changed_since_its_version_is_not_backed_up_as_it(workspace, file_roots):
    version = write_version(workspace, "work_products/report.md", b"old bytes")
    (Path(workspace.root_path) / "work_products" / "report.md").write_bytes(b"new bytes")

    assert artifact_version_backup(version=version) is None

    assert ArtifactVersion.objects.get(pk=version.pk).backup_location == ""
    assert not Event.objects.filter(name="artifact.backed_up").exists()
    assert list(file_roots["SAVED_REPORTS_ROOT"].rglob("*.v1")) == []


def test_the_shared_workspace_backs_up_under_default(file_roots):
    shared = workspace_shared()
    version = write_version(shared, "notes.md", b"flat")

    location = artifact_version_backup(version=version)

    assert location == str(file_roots["SAVED_REPORTS_ROOT"] / "default" / "notes.md.v1")


def test_a_symlink_in_the_backup_folder_is_refused_and_nothing_is_written_through_it(workspace, file_roots, tmp_path):
    # given the session's backup folder is a link to somewhere else
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (file_roots["SAVED_REPORTS_ROOT"] / "session_20260101_120000_abcd1234").symlink_to(elsewhere)
    version = write_version(workspace, "work_products/report.md", b"secret")

    # when / then
    with pytest.raises(BackupFailed):
        artifact_version_backup(version=version)
    assert list(elsewhere.iterdir()) == []
    assert ArtifactVersion.objects.get(pk=version.pk).backup_location == ""


def test_backup_names_cannot_collide():
    class Session:
        kind = "session"
        root_path = "/w/session_x"

    assert backup_parts(workspace=Session, path="work_products/a.md", number=1) == ("session_x", "a.md.v1")
    assert backup_parts(workspace=Session, path="work_products/a.md.v1", number=1) == ("session_x", "a.md.v1.v1")


def test_the_backup_task_backs_up_by_id_and_is_idempotent(workspace):
    version = write_version(workspace, "work_products/report.md", b"via celery")

    first = artifact_backup_task(version.pk)
    second = artifact_backup_task(version.pk)

    assert first == second == ArtifactVersion.objects.get(pk=version.pk).backup_location
    assert Event.objects.filter(name="artifact.backed_up").count() == 1
    assert artifact_backup_task(999_999) is None
