"""The ephemeral shared workspace: backed up, then emptied, on shutdown."""

import hashlib
import os
import signal
from pathlib import Path

import pytest

from workspaces.files.ephemeral import shutdown_handlers_install, workspace_shared_clear
from workspaces.files.services import workspace_shared
from workspaces.models import ArtifactVersion

pytestmark = pytest.mark.django_db


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def shared(db):
    workspace = workspace_shared()
    workspace.ephemeral = True
    workspace.save(update_fields=["ephemeral"])
    return workspace


def test_every_file_is_backed_up_and_verified_before_the_folder_is_emptied(shared, file_roots, tmp_path):
    # given
    root = Path(shared.root_path)
    (root / "report.md").write_bytes(b"# report")
    (root / "chart.png").write_bytes(b"\x89PNG")
    (root / ".report.md.0a1b2c.part").write_bytes(b"an unfinished upload")
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"not ours")
    (root / "link.txt").symlink_to(outside)

    # when
    report = workspace_shared_clear()

    # then
    assert sorted(os.listdir(root)) == []
    assert sorted(report.removed) == [".report.md.0a1b2c.part", "chart.png", "link.txt", "report.md"]
    assert report.kept == []
    saved = file_roots["SAVED_REPORTS_ROOT"] / "default"
    assert sorted(p.name for p in saved.iterdir()) == ["chart.png.v1", "report.md.v1"]
    for version in ArtifactVersion.objects.all():
        assert sha(Path(version.backup_location).read_bytes()) == version.sha256
    assert outside.read_bytes() == b"not ours"  # the link went, not what it pointed to


def test_a_workspace_that_is_not_ephemeral_is_left_alone(db, file_roots):
    workspace = workspace_shared()
    (Path(workspace.root_path) / "keep.md").write_bytes(b"keep")

    assert workspace_shared_clear() is None

    assert (Path(workspace.root_path) / "keep.md").read_bytes() == b"keep"
    assert not ArtifactVersion.objects.exists()


def test_without_a_shared_workspace_there_is_nothing_to_clear(db):
    assert workspace_shared_clear() is None


def test_a_file_whose_backup_fails_is_kept(shared, file_roots, tmp_path):
    # given the backup folder is a symlink, which backups refuse to write through
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (file_roots["SAVED_REPORTS_ROOT"] / "default").symlink_to(elsewhere)
    (Path(shared.root_path) / "precious.md").write_bytes(b"only copy")

    report = workspace_shared_clear()

    assert (Path(shared.root_path) / "precious.md").read_bytes() == b"only copy"
    assert report.kept == ["precious.md: no verified backup"]
    assert list(elsewhere.iterdir()) == []


def test_a_sub_folder_is_kept_and_reported(shared):
    (Path(shared.root_path) / "nested").mkdir()
    (Path(shared.root_path) / "nested" / "x.md").write_bytes(b"x")

    report = workspace_shared_clear()

    assert report.kept == ["nested: not a regular file"]
    assert (Path(shared.root_path) / "nested" / "x.md").exists()


def test_clearing_twice_ends_the_same(shared):
    (Path(shared.root_path) / "report.md").write_bytes(b"once")
    workspace_shared_clear()

    again = workspace_shared_clear()

    assert (again.removed, again.kept) == ([], [])
    assert ArtifactVersion.objects.count() == 1


def test_the_supervisor_helper_clears_on_a_signal_then_hands_over(shared, file_roots):
    (Path(shared.root_path) / "report.md").write_bytes(b"bye")
    received = []
    before = signal.getsignal(signal.SIGHUP)
    restore = shutdown_handlers_install(then=received.append)
    try:
        os.kill(os.getpid(), signal.SIGHUP)
    finally:
        restore()

    assert received == [signal.SIGHUP]
    assert os.listdir(shared.root_path) == []
    assert (file_roots["SAVED_REPORTS_ROOT"] / "default" / "report.md.v1").read_bytes() == b"bye"
    assert signal.getsignal(signal.SIGHUP) == before
