"""The observer in this process, against real files: write them, wait for the rows.

The observer's threads have their own database connections, so these tests commit
(transactional_db) and poll with ``wait_for``.
"""

import hashlib
import logging
import os
import time
from pathlib import Path

import pytest

from ledger.models import Event
from tests.worker import wait_for
from workspaces.files import observer as observer_module
from workspaces.files.observer import FileObserver
from workspaces.files.services import workspace_create_for_session, workspace_shared
from workspaces.models import Artifact, ArtifactVersion

pytestmark = pytest.mark.django_db(transaction=True)

FOLDER = "session_20260101_120000_abcd1234"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as out:
        out.write(data)
    return path


def versions(path: str) -> list[tuple[int, str, str]]:
    return list(
        ArtifactVersion.objects.filter(artifact__path=path)
        .order_by("number")
        .values_list("number", "sha256", "backup_location")
    )


def settled(observer: FileObserver, timeout: float = 30) -> None:
    """Wait until the observer has nothing left to do (and stays so for a moment)."""
    wait_for(lambda: observer.idle() and (time.sleep(0.2) or observer.idle()), timeout=timeout, message="idle")


@pytest.fixture
def session_ws(transactional_db):
    return workspace_create_for_session(folder_name=FOLDER)


@pytest.fixture
def work(session_ws) -> Path:
    return Path(session_ws.root_path) / "work_products"


@pytest.fixture
def observer(transactional_db):
    running = FileObserver(settle_ms=50, workers=2).start()
    yield running
    running.stop()


def test_a_work_product_becomes_a_version_with_a_verified_backup(work, observer, file_roots):
    # when
    write(work / "report.md", b"# Findings\n")

    # then
    wait_for(lambda: versions("work_products/report.md") and versions("work_products/report.md")[0][2])
    [(number, digest, location)] = versions("work_products/report.md")
    assert (number, digest) == (1, sha(b"# Findings\n"))
    assert location == str(file_roots["SAVED_REPORTS_ROOT"] / FOLDER / "report.md.v1")
    assert sha(Path(location).read_bytes()) == digest
    artifact = Artifact.objects.get()
    assert (artifact.kind, artifact.source) == ("work_product", "observer")
    assert Event.objects.filter(name="artifact.backed_up", subject_id=str(artifact.pk)).count() == 1


def test_the_other_session_folders_become_artifacts_of_their_kind_without_backups(session_ws, observer, file_roots):
    root = Path(session_ws.root_path)
    write(root / "search_results" / "q1.json", b"{}")
    write(root / "media" / "clip.mp4", b"\x00\x00\x00\x18ftyp")
    write(root / "workbench_activity" / "run.log", b"started\n")

    wait_for(lambda: Artifact.objects.count() == 3)
    settled(observer)

    assert dict(Artifact.objects.values_list("path", "kind")) == {
        "search_results/q1.json": "search_result",
        "media/clip.mp4": "media",
        "workbench_activity/run.log": "log",
    }
    assert set(ArtifactVersion.objects.values_list("backup_location", flat=True)) == {""}
    assert list(file_roots["SAVED_REPORTS_ROOT"].rglob("*.v1")) == []


def test_every_file_of_the_flat_shared_workspace_is_backed_up(transactional_db, observer, file_roots):
    shared = workspace_shared()
    write(Path(shared.root_path) / "chart.png", b"\x89PNG")
    write(Path(shared.root_path) / "nested" / "not-flat.md", b"ignored")

    wait_for(lambda: ArtifactVersion.objects.exclude(backup_location="").count() == 1)
    settled(observer)

    assert list(Artifact.objects.values_list("path", flat=True)) == ["chart.png"]
    assert (file_roots["SAVED_REPORTS_ROOT"] / "default" / "chart.png.v1").read_bytes() == b"\x89PNG"


def test_a_file_written_in_pauses_is_recorded_once_with_its_final_bytes(work, observer):
    # given a writer that keeps the file open and pauses longer than the settle time
    chunks = [b"first part\n", b"second part\n", b"third part\n"]
    with open(work / "slow.md", "wb") as out:
        for chunk in chunks:
            out.write(chunk)
            out.flush()
            time.sleep(0.3)

    # then
    wait_for(lambda: versions("work_products/slow.md"))
    settled(observer)
    [(number, digest, _)] = versions("work_products/slow.md")
    assert (number, digest) == (1, sha(b"".join(chunks)))


def test_a_file_renamed_into_place_is_recorded_and_its_temporary_is_not(work, observer, tmp_path):
    # given an atomic writer (temporary beside it, then rename) and a move from outside the tree
    write(work / ".report.md.0123abcdef.part", b"atomic")
    os.rename(work / ".report.md.0123abcdef.part", work / "report.md")
    outside = write(tmp_path / "elsewhere" / "moved.md", b"moved in")
    os.rename(outside, work / "moved.md")

    wait_for(lambda: Artifact.objects.count() == 2)
    settled(observer)

    assert sorted(Artifact.objects.values_list("path", flat=True)) == [
        "work_products/moved.md",
        "work_products/report.md",
    ]
    assert versions("work_products/report.md")[0][1] == sha(b"atomic")


def test_a_burst_of_two_thousand_files_misses_none(work, observer):
    for n in range(2000):
        write(work / f"burst-{n:04d}.md", f"file {n}\n".encode())

    wait_for(lambda: ArtifactVersion.objects.exclude(backup_location="").count() == 2000, timeout=180)
    settled(observer)

    assert ArtifactVersion.objects.count() == 2000
    assert Artifact.objects.count() == 2000


def test_when_the_queue_overflows_a_reconcile_picks_up_the_rest(work, transactional_db):
    observer = FileObserver(settle_ms=50, workers=2, queue_limit=50).start()
    try:
        settled(observer)
        reconciles = observer.counts["reconciles"]
        for n in range(400):
            write(work / f"over-{n:03d}.md", f"file {n}\n".encode())

        wait_for(lambda: ArtifactVersion.objects.exclude(backup_location="").count() == 400, timeout=120)
        settled(observer)
        assert observer.counts["reconciles"] > reconciles
        assert ArtifactVersion.objects.count() == 400
    finally:
        observer.stop()


def test_a_kernel_queue_overflow_asks_for_a_reconcile(observer):
    settled(observer)
    before = observer.counts["reconciles"]

    # watchdog says so only in its log: this is the line it writes on IN_Q_OVERFLOW
    logging.getLogger("watchdog.observers.inotify_c").warning("Inotify queue overflowed; filesystem events were lost")

    wait_for(lambda: observer.counts["reconciles"] > before, message="a reconcile")


def test_a_deletion_keeps_the_history_and_a_recreation_adds_a_version_only_for_new_bytes(work, observer, caplog):
    caplog.set_level(logging.INFO, logger="workspaces.files.observer")
    write(work / "report.md", b"first")
    wait_for(lambda: versions("work_products/report.md"))
    settled(observer)

    # when it is deleted
    (work / "report.md").unlink()
    wait_for(lambda: "was deleted or moved away" in caplog.text)
    assert len(versions("work_products/report.md")) == 1

    # and made again, first with other bytes, then with the same ones
    write(work / "report.md", b"second")
    wait_for(lambda: len(versions("work_products/report.md")) == 2)
    settled(observer)
    (work / "report.md").unlink()
    write(work / "report.md", b"second")
    time.sleep(0.3)
    settled(observer)

    assert [v[1] for v in versions("work_products/report.md")] == [sha(b"first"), sha(b"second")]
    assert all(v[2] for v in versions("work_products/report.md"))


def test_files_written_while_the_observer_was_down_are_recorded_on_start(work, transactional_db):
    write(work / "while-down.md", b"nobody was watching")
    write(work / "sub" / "also.md", b"nor here")
    time.sleep(0.06)  # older than the settle time

    observer = FileObserver(settle_ms=50).start()
    try:
        wait_for(lambda: ArtifactVersion.objects.exclude(backup_location="").count() == 2)
    finally:
        observer.stop()


def test_a_session_folder_made_after_start_is_watched(observer, transactional_db):
    workspace = workspace_create_for_session(folder_name="session_20260202_090000_feedbeef")
    write(Path(workspace.root_path) / "work_products" / "fresh.md", b"new folder")

    wait_for(lambda: versions("work_products/fresh.md") and versions("work_products/fresh.md")[0][2])


def test_symlinks_are_never_followed(work, observer, tmp_path):
    secret = write(tmp_path / "outside" / "secret.txt", b"do not copy")
    (work / "link.md").symlink_to(secret)
    (work / "linked-folder").symlink_to(secret.parent)
    write(work / "real.md", b"real")  # a marker: once it is in, the links had their chance

    wait_for(lambda: versions("work_products/real.md"))
    settled(observer)
    observer.request_reconcile("test")
    settled(observer)

    assert list(Artifact.objects.values_list("path", flat=True)) == ["work_products/real.md"]


def test_temporary_and_dot_files_are_ignored(work, observer):
    write(work / ".report.md.5f2b9c0d.part", b"half an upload")
    write(work / ".report.md.swp", b"editor swap")
    write(work / ".cache" / "x.md", b"hidden folder")
    write(work / "marker.md", b"done")

    wait_for(lambda: versions("work_products/marker.md"))
    settled(observer)

    assert list(Artifact.objects.values_list("path", flat=True)) == ["work_products/marker.md"]


def test_a_hard_link_is_recorded(work, observer, tmp_path):
    original = write(tmp_path / "outside" / "linked.md", b"two names")

    os.link(original, work / "linked.md")

    wait_for(lambda: versions("work_products/linked.md"))


def test_a_snapshot_change_queues_sync_for_its_session_folder(observer, file_roots, monkeypatch):
    # given a stand-in for queueing sync-to-db's task (it is queued by name: board sits above us)
    calls = []

    def queued(task, folder):
        assert task == "board.tasks.state_sync_task"
        calls.append(folder)

    monkeypatch.setattr(observer_module, "enqueue_task", queued)
    folder = file_roots["STATE_DIR"] / "session-1770537842"

    # when an orchestrator writes its snapshots, the way it does (temporary, then rename)
    write(folder / "orchestrator.json", b'{"status": "running"}')
    write(folder / ".backend.json.tmp", b'{"status": "running"}')
    os.rename(folder / ".backend.json.tmp", folder / "backend.json")
    write(file_roots["STATE_DIR"] / "not-a-session" / "x.json", b"{}")  # not a session folder: no sync

    # then
    wait_for(lambda: calls, message="a sync")
    settled(observer)
    assert set(calls) == {"session-1770537842"}
    assert len(calls) <= 2  # events close together coalesce


def test_a_snapshot_change_without_the_sync_task_is_logged_and_skipped(observer, file_roots, monkeypatch, caplog):
    monkeypatch.setattr(observer_module, "STATE_SYNC_TASK", "board.tasks.no_such_task")  # not registered
    caplog.set_level(logging.WARNING, logger="workspaces.files.observer")

    write(file_roots["STATE_DIR"] / "session-1" / "orchestrator.json", b"{}")

    wait_for(lambda: "not synced" in caplog.text)


def test_a_folder_that_is_not_a_registered_workspace_is_ignored_and_logged_once(
    observer, file_roots, monkeypatch, caplog
):
    monkeypatch.setattr(observer_module, "UNREGISTERED_GRACE_SECONDS", 0.3)
    caplog.set_level(logging.WARNING, logger="workspaces.files.reconcile")
    stray = file_roots["WORKSPACE_ROOT"] / "somebody_elses"

    write(stray / "work_products" / "a.md", b"a")
    write(stray / "work_products" / "b.md", b"b")

    wait_for(lambda: "not a registered workspace" in caplog.text)
    settled(observer)
    assert not Artifact.objects.exists()
    assert caplog.text.count("ignoring") == 1
