"""Temporaries of uploads that died are removed by the reconcile task (and at web start:
tests/config/test_chunked_upload_server.py), only once no upload can still be writing them,
and are never artifacts."""

import os
import time
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.utils.module_loading import import_string

from workspaces.files import reconcile
from workspaces.files.services import workspace_create_for_session
from workspaces.files.upload_parts import upload_parts_sweep_in_background
from workspaces.models import Artifact
from workspaces.tasks import workspace_reconcile_task

pytestmark = pytest.mark.django_db


def part_name(name: str) -> str:
    return f".{name}.{uuid.uuid4().hex}.part"


def write(path: Path, data: bytes, *, age_seconds: float = 0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if age_seconds:
        then = time.time() - age_seconds
        os.utime(path, (then, then), follow_symlinks=False)
    return path


@pytest.fixture
def folders(file_roots, settings, monkeypatch):
    settings.UPLOAD_TIMEOUT_SECONDS = 3600
    settings.OBSERVER_SETTLE_MS = 0
    monkeypatch.setattr(reconcile, "RECONCILE_QUIET_NS", 0)
    workspace = workspace_create_for_session(folder_name="session_20260101_120000_abcd1234")
    return Path(workspace.root_path), file_roots["SAVED_REPORTS_ROOT"]


def test_the_reconcile_task_removes_stale_upload_temporaries_and_keeps_the_rest(folders, tmp_path):
    root, backups = folders
    # given temporaries of uploads that died an hour and more ago, in a workspace and a backup folder
    stale = [
        write(root / "work_products" / part_name("report.md"), b"half a report", age_seconds=3700),
        write(root / "media" / "deep" / part_name("a.png"), b"\x89PNG", age_seconds=86400),
        write(backups / root.name / part_name("report.md"), b"half a backup", age_seconds=3700),
    ]
    # ... one an upload is writing right now, a stale dot file that is not ours, a real file,
    # and a stale "part" that is a symlink to a file outside (its target must survive)
    fresh = write(root / "work_products" / part_name("live.bin"), b"in progress")
    swap = write(root / "work_products" / ".notes.md.swp", b"editor", age_seconds=86400)
    real = write(root / "work_products" / "report.md", b"# report", age_seconds=86400)
    outside = write(tmp_path / "outside.txt", b"not yours")
    link = root / "work_products" / part_name("link")
    link.symlink_to(outside)
    then = time.time() - 86400
    os.utime(link, (then, then), follow_symlinks=False)

    # when the periodic reconcile runs
    summary = workspace_reconcile_task()

    # then only the stale temporaries are gone, and no temporary became an artifact
    assert summary["stale_parts_removed"] == 3
    assert [p.exists() for p in stale] == [False, False, False]
    assert (fresh.read_bytes(), swap.read_bytes(), real.read_bytes(), outside.read_bytes()) == (
        b"in progress",
        b"editor",
        b"# report",
        b"not yours",
    )
    assert link.is_symlink()
    assert list(Artifact.objects.values_list("path", flat=True)) == ["work_products/report.md"]
    assert summary["recorded"] == 1


def test_a_second_pass_removes_nothing_more(folders):
    root, _ = folders
    write(root / "work_products" / part_name("x.bin"), b"x", age_seconds=3700)

    assert workspace_reconcile_task()["stale_parts_removed"] == 1
    assert workspace_reconcile_task()["stale_parts_removed"] == 0


def test_the_start_up_sweep_runs_beside_start_up(folders):
    root, _ = folders
    stale = write(root / "work_products" / part_name("x.bin"), b"x", age_seconds=3700)
    fresh = write(root / "work_products" / part_name("y.bin"), b"y")

    # The thread may be done before anyone looks for it by name: the call hands it back.
    sweep = upload_parts_sweep_in_background()
    assert sweep.name == "upload-parts-sweep" and sweep.daemon
    sweep.join(timeout=30)

    assert not sweep.is_alive()
    assert (stale.exists(), fresh.exists()) == (False, True)


def test_a_web_process_starts_the_sweep():
    """config/asgi.py calls each of settings.WEB_STARTUP by name: the sweep is one, and each imports."""
    assert "workspaces.files.upload_parts.upload_parts_sweep_in_background" in settings.WEB_STARTUP
    assert [import_string(name) for name in settings.WEB_STARTUP][0] is upload_parts_sweep_in_background
