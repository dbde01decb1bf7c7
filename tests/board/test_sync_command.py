"""python manage.py sync_state [session] [--drift] [--force] [--json]."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from board.models import SyncIssue, Task
from tests.board.test_sync_service import ORCHESTRATOR, SESSION, snapshot, write_file

pytestmark = pytest.mark.django_db


def run(*args) -> str:
    out = StringIO()
    call_command("sync_state", *args, stdout=out)
    return out.getvalue()


def test_the_command_syncs_with_progress_and_a_summary():
    snapshot("orchestrator", ORCHESTRATOR)
    snapshot("backend", {"task": "A", "status": "wobbly"})
    write_file(f"{SESSION}/qa.json", "{")

    output = run()

    lines = output.splitlines()
    assert lines[0] == "3 snapshot files in 1 sessions; 3 changed"
    assert lines[1] == "  3/3 changed files done"
    assert "3 files in 1 sessions: 0 unchanged, 1 synced" in output
    assert f"kept: {SESSION}/backend.json: unknown status 'wobbly'" in output
    assert "2 file(s) with sync issues" in output
    assert lines[-1] == "Sync done."
    assert Task.objects.get().status == "backlog"


def test_one_session_and_json_output():
    snapshot("backend", {"task": "A", "status": "running"}, session="session-aaa")
    snapshot("backend", {"task": "B", "status": "running"}, session="session-bbb")

    report = json.loads(run("session-aaa", "--json"))

    assert (report["session_key"], report["tasks_created"], report["files"]) == ("session-aaa", 1, 1)
    assert list(Task.objects.values_list("external_id", flat=True)) == ["task-session-aaa-backend"]


def test_a_second_run_reports_everything_unchanged():
    snapshot("backend", {"task": "A", "status": "running"})
    run()

    output = run()

    assert "1 snapshot files in 1 sessions; 0 changed" in output
    assert "1 unchanged, 0 synced" in output


def test_force_reapplies():
    snapshot("backend", {"task": "A", "status": "running"})
    run()
    Task.objects.update(status="review")

    run("--force")

    assert Task.objects.get().status == "in_progress"


def test_drift_writes_nothing_and_lists_what_differs():
    snapshot("backend", {"task": "A", "status": "running"})
    run()
    snapshot("qa", {"task": "Q", "status": "running"})
    Task.objects.update(status="review")

    output = run("--drift")

    assert f"not synced (new): {SESSION}/qa.json" in output
    assert f"status differs: {SESSION}/backend.json: file says in_progress, database has review" in output
    assert Task.objects.count() == 1
    assert not SyncIssue.objects.exists()


def test_drift_says_when_there_is_none():
    snapshot("backend", {"task": "A", "status": "running"})
    run()

    assert run("--drift").splitlines()[-1] == "No drift: the database matches the files."


def test_a_bad_session_name_is_a_command_error():
    with pytest.raises(CommandError, match="not a session folder name"):
        run("../etc")
