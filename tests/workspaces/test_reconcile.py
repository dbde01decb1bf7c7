"""The reconcile pass: what is on disk under WORKSPACE_ROOT, recorded; what is not ours, left alone."""

import hashlib
import os
import time
from pathlib import Path

import pytest

from config.actors import SYSTEM
from ledger.models import Event
from workspaces.files import reconcile
from workspaces.files.reconcile import FileMemory, workspace_reconcile
from workspaces.files.services import artifact_write, workspace_create_for_session, workspace_shared
from workspaces.models import Artifact, ArtifactVersion
from workspaces.tasks import workspace_reconcile_task

pytestmark = pytest.mark.django_db


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def put(root: Path, relative: str, data: bytes) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


@pytest.fixture
def session_ws(db):
    return workspace_create_for_session(folder_name="session_20260101_120000_abcd1234")


def test_files_written_while_no_observer_ran_are_recorded(session_ws, file_roots, tmp_path):
    # given files in every session folder, and things that are not artifacts
    root = Path(session_ws.root_path)
    put(root, "work_products/report.md", b"# report")
    put(root, "work_products/deep/er/chart.csv", b"a,b")
    put(root, "search_results/q1.json", b"{}")
    put(root, "media/clip.mp4", b"\x00\x01")
    put(root, "workbench_activity/run.log", b"ok\n")
    put(root, "stray.txt", b"not in a session folder")
    put(root, "work_products/.report.md.0123abcd.part", b"half an upload")
    put(root, "work_products/.report.md.swp", b"editor")
    outside = put(tmp_path, "outside/secret.txt", b"secret")
    (root / "work_products" / "link.md").symlink_to(outside)
    (root / "work_products" / "linked-dir").symlink_to(outside.parent)
    put(file_roots["WORKSPACE_ROOT"], "not_a_workspace/work_products/x.md", b"x")

    # when
    report = workspace_reconcile(settle_ns=0)

    # then
    assert dict(Artifact.objects.values_list("path", "kind")) == {
        "work_products/report.md": "work_product",
        "work_products/deep/er/chart.csv": "work_product",
        "search_results/q1.json": "search_result",
        "media/clip.mp4": "media",
        "workbench_activity/run.log": "log",
    }
    assert set(Artifact.objects.values_list("source", flat=True)) == {"observer"}
    backed = dict(ArtifactVersion.objects.values_list("artifact__path", "backup_location"))
    saved = file_roots["SAVED_REPORTS_ROOT"] / "session_20260101_120000_abcd1234"
    assert backed == {
        "work_products/report.md": str(saved / "report.md.v1"),
        "work_products/deep/er/chart.csv": str(saved / "deep" / "er" / "chart.csv.v1"),
        "search_results/q1.json": "",
        "media/clip.mp4": "",
        "workbench_activity/run.log": "",
    }
    assert (report.workspaces, report.files, report.recorded, report.backed_up) == (1, 5, 5, 2)
    assert report.ignored_folders == ["not_a_workspace"]
    assert Event.objects.filter(name="artifact.created").count() == 5
    assert Event.objects.filter(name="artifact.backed_up").count() == 2


def test_a_second_pass_changes_nothing(session_ws):
    put(Path(session_ws.root_path), "work_products/report.md", b"# report")
    workspace_reconcile(settle_ns=0)
    events = Event.objects.count()

    report = workspace_reconcile(settle_ns=0)

    assert (report.recorded, report.unchanged, report.backed_up) == (0, 1, 0)
    assert ArtifactVersion.objects.count() == 1
    assert Event.objects.count() == events


def test_changed_bytes_add_a_version_and_identical_bytes_do_not(session_ws):
    path = put(Path(session_ws.root_path), "work_products/report.md", b"v1")
    workspace_reconcile(settle_ns=0)
    path.write_bytes(b"v2")
    workspace_reconcile(settle_ns=0)
    path.write_bytes(b"v2")

    workspace_reconcile(settle_ns=0)

    assert list(ArtifactVersion.objects.order_by("number").values_list("number", "sha256")) == [
        (1, sha(b"v1")),
        (2, sha(b"v2")),
    ]


def test_the_flat_shared_workspace_records_and_backs_up_its_top_level_files_only(file_roots):
    shared = workspace_shared()
    root = Path(shared.root_path)
    put(root, "summary.pdf", b"%PDF")
    put(root, "nested/ignored.md", b"the flat layout has no sub-folders")

    report = workspace_reconcile(settle_ns=0)

    version = ArtifactVersion.objects.get()
    assert version.artifact.path == "summary.pdf"
    assert version.backup_location == str(file_roots["SAVED_REPORTS_ROOT"] / "default" / "summary.pdf.v1")
    assert report.backed_up == 1


def test_the_default_folder_is_registered_as_the_shared_workspace_on_first_sight(file_roots):
    put(file_roots["WORKSPACE_ROOT"], "default/hello.txt", b"hi")

    workspace_reconcile(settle_ns=0)

    artifact = Artifact.objects.get()
    assert (artifact.workspace.kind, artifact.path) == ("shared", "hello.txt")


def test_an_api_upload_whose_backup_failed_gets_one(session_ws, file_roots):
    # A file where the backup folder should be: the upload's own copy fails, the upload stands.
    blocker = file_roots["SAVED_REPORTS_ROOT"] / "session_20260101_120000_abcd1234"
    blocker.write_text("in the way")
    artifact, version, _ = artifact_write(
        actor=SYSTEM, workspace=session_ws, path="work_products/api.md", chunks=[b"uploaded"]
    )
    assert version.backup_location == ""
    blocker.unlink()

    report = workspace_reconcile(settle_ns=0)

    version.refresh_from_db()
    assert version.backup_location.endswith("session_20260101_120000_abcd1234/api.md.v1")
    assert (report.recorded, report.backed_up) == (0, 1)
    assert ArtifactVersion.objects.count() == 1


def test_a_file_still_being_written_is_deferred_not_recorded(session_ws):
    path = put(Path(session_ws.root_path), "work_products/growing.md", b"part")
    deferred = []

    report = workspace_reconcile(settle_ns=60 * 1_000_000_000, defer=deferred.append)

    assert deferred == [str(path)]
    assert report.busy == 1
    assert not Artifact.objects.exists()


def test_remembered_files_are_not_read_again(session_ws, monkeypatch):
    path = put(Path(session_ws.root_path), "work_products/report.md", b"# report")
    past = time.time() - 60
    os.utime(path, (past, past))
    memory = FileMemory()
    # The signature is remembered only when the file was quiet before it was read.
    monkeypatch.setattr(reconcile, "QUIET_NS", 0)
    workspace_reconcile(settle_ns=0, memory=memory)
    reads = []
    original = reconcile.hash_fd
    monkeypatch.setattr(reconcile, "hash_fd", lambda fd: reads.append(fd) or original(fd))

    report = workspace_reconcile(settle_ns=0, memory=memory)

    assert reads == []
    assert report.unchanged == 1


def test_an_archived_workspace_is_left_alone(session_ws):
    put(Path(session_ws.root_path), "work_products/report.md", b"# report")
    session_ws.status = "archived"
    session_ws.save(update_fields=["status"])

    report = workspace_reconcile(settle_ns=0)

    assert not Artifact.objects.exists()
    assert report.ignored_folders == ["session_20260101_120000_abcd1234"]


def test_the_task_runs_a_pass_and_returns_its_counts(session_ws, settings, monkeypatch):
    settings.OBSERVER_SETTLE_MS = 0
    monkeypatch.setattr(reconcile, "RECONCILE_QUIET_NS", 0)
    put(Path(session_ws.root_path), "media/a.png", b"\x89PNG")

    summary = workspace_reconcile_task()

    assert summary["recorded"] == 1
    assert summary["files"] == 1


def test_a_work_product_is_recorded_even_when_its_backup_cannot_be_made(session_ws, file_roots, tmp_path, caplog):
    # given the session's backup folder is a symlink, which backups refuse to write through
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (file_roots["SAVED_REPORTS_ROOT"] / "session_20260101_120000_abcd1234").symlink_to(elsewhere)
    put(Path(session_ws.root_path), "work_products/report.md", b"# report")

    report = workspace_reconcile(settle_ns=0)

    version = ArtifactVersion.objects.get()
    assert (version.sha256, version.backup_location) == (sha(b"# report"), "")
    assert (report.recorded, report.backed_up) == (1, 0)
    assert list(elsewhere.iterdir()) == []
    assert "recording it without a backup" in caplog.text
