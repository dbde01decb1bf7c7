"""The drift report: files gone, files not yet synced, statuses that differ."""

import pytest

from board.models import Task
from board.sync import state_sync
from board.sync.selectors import sync_drift
from sessions_app.models import AgentSession
from tests.board.test_sync_service import ORCHESTRATOR, SESSION, snapshot, write_file

pytestmark = pytest.mark.django_db


def test_no_drift_right_after_a_sync():
    snapshot("orchestrator", ORCHESTRATOR)
    snapshot("backend", {"task": "A", "status": "running"})
    state_sync()

    drift = sync_drift()

    assert drift.clean
    assert drift.files == 2


def test_drift_shows_gone_files_unsynced_files_and_status_mismatches():
    # given a synced session
    snapshot("orchestrator", ORCHESTRATOR)
    gone = snapshot("backend", {"task": "A", "status": "running"})
    snapshot("qa", {"task": "Q", "status": "pending"})
    state_sync()
    # then: a file removed, a file added, a file changed, one broken, and a card moved by hand
    gone.unlink()
    snapshot("frontend", {"task": "B", "status": "running"})
    snapshot("orchestrator", {**ORCHESTRATOR, "branchName": "feat/other"})
    write_file(f"{SESSION}/docs.json", "{")
    Task.objects.filter(external_id=f"task-{SESSION}-qa").update(status="done")
    AgentSession.objects.filter(pk=SESSION).update(status="waiting_for_input")

    # when
    drift = sync_drift()

    # then
    assert [(row["path"], row["external_id"], row["db_status"]) for row in drift.missing_files] == [
        (f"{SESSION}/backend.json", f"task-{SESSION}-backend", "in_progress")
    ]
    assert sorted((row["path"], row["reason"]) for row in drift.unsynced_files) == [
        (f"{SESSION}/docs.json", "new"),
        (f"{SESSION}/frontend.json", "new"),
        (f"{SESSION}/orchestrator.json", "changed"),
    ]
    assert drift.status_mismatches == [
        {
            "path": f"{SESSION}/qa.json",
            "session": SESSION,
            "external_id": f"task-{SESSION}-qa",
            "file_status": "ready",
            "db_status": "done",
        }
    ]
    assert not drift.clean


def test_a_file_with_an_open_issue_is_unsynced_with_its_error():
    write_file(f"{SESSION}/docs.json", "{")
    state_sync()

    drift = sync_drift(session_key=SESSION)

    assert [(row["reason"], row["error"][:14]) for row in drift.unsynced_files] == [("issue", "not valid JSON")]
    assert drift.open_issues == 1


def test_a_session_status_that_differs_is_a_mismatch():
    snapshot("orchestrator", ORCHESTRATOR)
    state_sync()
    AgentSession.objects.filter(pk=SESSION).update(status="waiting_for_input")

    drift = sync_drift()

    assert [(row["path"], row["file_status"], row["db_status"]) for row in drift.status_mismatches] == [
        (f"{SESSION}/orchestrator.json", "running", "waiting_for_input")
    ]
