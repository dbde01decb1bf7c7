"""Archival in a real Celery worker, killed with SIGKILL at several points (SPEC §7).

After every kill: the folder is intact, or the database names an archive that verifies now
("folder intact OR verified archive", never neither). Then a new worker runs the task again
and the end state is the one a clean run gives. The points are found by watching the disk:
the temporary archive appearing (writing), the final archive appearing (verifying), and the
tombstone appearing (deleting); one more test kills at random moments, several times over.
"""

import os
import random
import signal
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from ledger.models import Event
from tests.worker import WorkerProcess, wait_for
from tests.workspaces.archive_support import (
    archive_storage_fixture,  # noqa: F401 - autouse: storages["archives"] in ARCHIVE_ROOT
    ended_session_workspace,
    tree_state,
)
from workspaces.archive.services import stored_archive_check, stored_manifest, tombstone_path
from workspaces.models import Workspace
from workspaces.tasks import workspace_archive_task

pytestmark = pytest.mark.worker

FOLDERS = 400
FILES_PER_FOLDER = 20  # 8,000 files: slow enough to kill in each step, quick enough for a test


@pytest.fixture
def big_workspace():
    """A session workspace past its retention, with 8,000 small files, and its expected state."""
    workspace = ended_session_workspace(days_ago=30)
    root = Path(workspace.root_path)
    rng = random.Random(4)
    for folder in range(FOLDERS):
        path = root / "work_products" / f"batch-{folder:03d}"
        path.mkdir(parents=True)
        for number in range(FILES_PER_FOLDER):
            size = rng.randrange(512, 12_000)
            body = os.urandom(size) if number % 2 else (f"line {number}\n" * (size // 8)).encode()
            (path / f"file-{number:02d}.{'bin' if number % 2 else 'txt'}").write_bytes(body)
    os.symlink("work_products/batch-000", root / "first-batch")
    return workspace, tree_state(root)


def _kill_when(worker: WorkerProcess, seen, *, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not seen():
        if time.monotonic() > deadline:
            raise AssertionError(f"the point to kill at never came:\n{worker.output()}")
        time.sleep(0.001)
    worker.kill(signal.SIGKILL)


def _intact_or_verified(workspace: Workspace, expected: dict) -> str:
    """The promise, checked from outside the worker."""
    workspace.refresh_from_db()
    if workspace.archive_verified_at is None:
        assert workspace.status == Workspace.Status.ACTIVE
        assert tree_state(Path(workspace.root_path)) == expected, "no verified archive and the folder is not intact"
        return "folder intact"
    manifest = stored_manifest(workspace)
    stored_archive_check(workspace=workspace, manifest=manifest)  # raises unless every sha256 matches
    files = {e.path: e.size for e in manifest.entries if e.type == "file"}
    assert files == {path: len(v[2]) for path, v in expected.items() if v[0] == "file"}
    return "verified archive"


def _lease_lapses(workspace: Workspace) -> None:
    """What time does to a killed worker's claim, at once."""
    Workspace.objects.filter(pk=workspace.pk, archive_claimed_until__isnull=False).update(
        archive_claimed_until=timezone.now() - timedelta(seconds=1)
    )


def _rerun_to_the_end(workspace: Workspace, log: Path) -> None:
    """The killed worker's lease lapses; a new worker runs the task to the end."""
    _lease_lapses(workspace)
    worker = WorkerProcess(log).start()
    try:
        workspace_archive_task.delay(workspace.pk)
        wait_for(
            lambda: Workspace.objects.get(pk=workspace.pk).status == Workspace.Status.ARCHIVED,
            timeout=120,
            message=f"the archive to finish:\n{worker.output()}",
        )
    finally:
        worker.stop()


def _as_after_a_clean_run(workspace: Workspace, expected: dict, storage: Path) -> None:
    workspace.refresh_from_db()
    name = f"workspace-{workspace.pk}-{Path(workspace.root_path).name}"
    assert workspace.status == Workspace.Status.ARCHIVED
    assert (workspace.archive_location, workspace.archive_claimed_by, workspace.archive_claimed_until) == (
        f"{name}.tar.zst",
        "",
        None,
    )
    assert not os.path.lexists(workspace.root_path)
    assert not os.path.lexists(tombstone_path(workspace))
    assert sorted(os.listdir(storage)) == [f"{name}.manifest.json", f"{name}.tar.zst"]  # no .part left
    assert _intact_or_verified(workspace, expected) == "verified archive"
    assert Event.objects.filter(name="workspace.archived", subject_id=str(workspace.pk)).count() == 1


def _parts(storage: Path) -> list[str]:
    return [name for name in os.listdir(storage) if name.endswith(".part")]


@pytest.mark.parametrize("point", ["writing", "verifying", "deleting"])
def test_killed_at_each_step_then_finished_by_a_new_worker(
    celery_worker_process, big_workspace, archive_storage, tmp_path, point
):
    # given a worker archiving a workspace of 8,000 files
    workspace, expected = big_workspace
    final = archive_storage / f"workspace-{workspace.pk}-{Path(workspace.root_path).name}.tar.zst"
    tombstone = tombstone_path(workspace)
    seen = {
        "writing": lambda: bool(_parts(archive_storage)),
        "verifying": final.exists,
        "deleting": tombstone.exists,
    }[point]
    workspace_archive_task.delay(workspace.pk)

    # when it is killed at that point
    _kill_when(celery_worker_process, seen)

    # then the folder is intact or a verified archive exists, never neither
    state = _intact_or_verified(workspace, expected)
    assert state == {"writing": "folder intact", "verifying": "folder intact", "deleting": "verified archive"}[point]
    if point == "writing":
        assert _parts(archive_storage), "killed while writing: the temporary archive is still there"
    if point == "deleting":
        assert not Path(workspace.root_path).exists()

    # and a new worker ends where a clean run ends
    _rerun_to_the_end(workspace, tmp_path / "worker2.log")
    _as_after_a_clean_run(workspace, expected, archive_storage)


def test_killed_at_random_moments_again_and_again(celery_worker_process, big_workspace, archive_storage, tmp_path):
    workspace, expected = big_workspace
    rng = random.Random()
    workers = [celery_worker_process]
    states = []
    try:
        for attempt in range(4):
            worker = workers[-1]
            workspace_archive_task.delay(workspace.pk)
            wait_for(lambda w=worker: "workspace_archive_task" in w.output(), timeout=60, message="the task to start")
            time.sleep(rng.uniform(0.0, 1.5))
            worker.kill(signal.SIGKILL)
            states.append(_intact_or_verified(workspace, expected))
            if Workspace.objects.get(pk=workspace.pk).status == Workspace.Status.ARCHIVED:
                break
            _lease_lapses(workspace)
            if attempt < 3:
                workers.append(WorkerProcess(tmp_path / f"worker-{attempt}.log").start())
    finally:
        for worker in workers:
            worker.stop()

    _rerun_to_the_end(workspace, tmp_path / "worker-last.log")
    _as_after_a_clean_run(workspace, expected, archive_storage)
    assert set(states) <= {"folder intact", "verified archive"}
