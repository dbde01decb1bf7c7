"""``manage.py observe`` as the process it runs as: started, fed files, stopped with a signal."""

import os
import signal
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from tests.worker import ROOT, wait_for, worker_environment
from workspaces.files.services import workspace_create_for_session, workspace_shared
from workspaces.models import ArtifactVersion

pytestmark = pytest.mark.django_db(transaction=True)


class ObserveProcess:
    def __init__(self, log_path: Path):
        self.log_path = log_path
        self.log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "observe"],
            cwd=ROOT,
            env=worker_environment({"OBSERVER_SETTLE_MS": "20"}),
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        wait_for(
            lambda: b"Observing" in log_path.read_bytes() or self.process.poll() is not None,
            timeout=60,
            message="the observer to start",
        )
        assert self.process.poll() is None, self.output()

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")[-5000:]

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
        return self.process.returncode


@pytest.fixture
def observe(tmp_path):
    started = []

    def start() -> ObserveProcess:
        started.append(ObserveProcess(tmp_path / f"observe-{len(started)}.log"))
        return started[-1]

    yield start
    for process in started:
        process.stop(signal.SIGKILL)


def test_sigterm_backs_up_and_empties_the_ephemeral_shared_workspace(observe, file_roots):
    # given an ephemeral shared workspace with files, and a session work product
    shared = workspace_shared()
    shared.ephemeral = True
    shared.save(update_fields=["ephemeral"])
    session = workspace_create_for_session(folder_name="session_20260101_120000_abcd1234")
    process = observe()
    (Path(session.root_path) / "work_products" / "report.md").write_bytes(b"# kept in place")
    (Path(shared.root_path) / "draft.md").write_bytes(b"scratch")
    (Path(shared.root_path) / "data.csv").write_bytes(b"a,b\n1,2\n")
    wait_for(lambda: ArtifactVersion.objects.exclude(backup_location="").count() == 3, message="three backups")

    # when
    code = process.stop(signal.SIGTERM)

    # then
    assert code == 0, process.output()
    assert os.listdir(shared.root_path) == []
    saved = file_roots["SAVED_REPORTS_ROOT"]
    assert (saved / "default" / "draft.md.v1").read_bytes() == b"scratch"
    assert (saved / "default" / "data.csv.v1").read_bytes() == b"a,b\n1,2\n"
    assert (Path(session.root_path) / "work_products" / "report.md").exists()  # only the shared one is scratch
    assert "Cleared the ephemeral shared workspace: 2 removed, 0 kept" in process.output()


def test_files_written_just_before_the_signal_are_backed_up_before_they_go(observe, file_roots):
    shared = workspace_shared()
    shared.ephemeral = True
    shared.save(update_fields=["ephemeral"])
    process = observe()

    (Path(shared.root_path) / "last-minute.md").write_bytes(b"written at shutdown")
    code = process.stop(signal.SIGHUP)

    assert code == 0, process.output()
    assert os.listdir(shared.root_path) == []
    assert (file_roots["SAVED_REPORTS_ROOT"] / "default" / "last-minute.md.v1").read_bytes() == b"written at shutdown"


def test_a_shared_workspace_that_is_not_ephemeral_survives_sigint(observe):
    shared = workspace_shared()
    process = observe()
    (Path(shared.root_path) / "keep.md").write_bytes(b"keep")
    wait_for(lambda: ArtifactVersion.objects.exclude(backup_location="").exists())

    code = process.stop(signal.SIGINT)

    assert code == 0, process.output()
    assert (Path(shared.root_path) / "keep.md").read_bytes() == b"keep"


def test_once_runs_a_single_reconcile(transactional_db, settings, monkeypatch):
    from workspaces.files import reconcile

    monkeypatch.setattr(reconcile, "RECONCILE_QUIET_NS", 0)
    settings.OBSERVER_SETTLE_MS = 0
    session = workspace_create_for_session(folder_name="session_20260101_120000_abcd1234")
    (Path(session.root_path) / "media" / "a.png").write_bytes(b"\x89PNG")
    out = StringIO()

    call_command("observe", "--once", stdout=out)

    assert "'recorded': 1" in out.getvalue()
