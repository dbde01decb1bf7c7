"""POST /api/v1/sync/, GET /api/v1/sync/issues/ and /api/v1/sync/drift/: who may, and what they do."""

from unittest import mock

import pytest

from board.models import SyncedFile, SyncIssue, Task
from ledger.models import Event
from tests.board.helpers import assert_json_error, post_json
from tests.board.test_sync_service import SESSION, snapshot, write_file

pytestmark = pytest.mark.django_db
SYNC = "/api/v1/sync/"
ISSUES = "/api/v1/sync/issues/"
DRIFT = "/api/v1/sync/drift/"


def sync_rows() -> dict:
    return {
        "tasks": list(Task.objects.values()),
        "synced": list(SyncedFile.objects.values()),
        "issues": list(SyncIssue.objects.values()),
        "events": list(Event.objects.values()),
    }


@pytest.fixture
def queued():
    """Queued Celery tasks, captured instead of sent: (args, task_id) per apply_async."""
    with mock.patch("board.tasks.state_sync_task.apply_async") as apply_async:
        yield apply_async


# --- POST /sync/ --------------------------------------------------------------------------------


def test_staff_queue_a_full_sync_after_commit(staff_client, queued, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = post_json(staff_client, SYNC, {})

    assert response.status_code == 202
    body = response.json()
    assert (body["session"], body["status"]) == (None, "queued")
    assert len(callbacks) == 1
    queued.assert_called_once_with(args=[None], task_id=body["task_id"])


def test_an_orchestrating_agent_may_queue_one_session(orchestrator_client, queued, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = post_json(orchestrator_client, SYNC, {"session": SESSION})

    assert response.status_code == 202
    queued.assert_called_once_with(args=[SESSION], task_id=response.json()["task_id"])


def test_nothing_is_queued_when_the_transaction_rolls_back(staff_client, queued, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        post_json(staff_client, SYNC, {})

    assert len(callbacks) == 1
    queued.assert_not_called()  # only on commit


def test_a_plain_agent_may_not_sync_and_nothing_changes(agent_client, queued, django_capture_on_commit_callbacks):
    snapshot("backend", {"task": "A", "status": "running"})
    before = sync_rows()

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = post_json(agent_client, SYNC, {"session": SESSION})
        waited = post_json(agent_client, f"{SYNC}?wait=true", {"session": SESSION})

    assert_json_error(response, 403)
    assert_json_error(waited, 403)
    assert callbacks == []
    queued.assert_not_called()
    assert sync_rows() == before


def test_anonymous_is_refused(client, queued):
    response = post_json(client, SYNC, {})

    assert response.status_code in (401, 403)
    queued.assert_not_called()


@pytest.mark.parametrize(
    "body",
    [{"session": "../etc"}, {"session": "session-a/b"}, {"session": 7}, {"session": "s" * 200}, {"other": 1}, []],
)
def test_a_bad_body_is_a_400_and_queues_nothing(staff_client, queued, body):
    response = post_json(staff_client, SYNC, body)

    assert_json_error(response, 400)
    queued.assert_not_called()


def test_wait_runs_one_session_now_and_answers_with_the_report(staff_client, queued):
    snapshot("backend", {"task": "A", "status": "running"})

    response = post_json(staff_client, f"{SYNC}?wait=true", {"session": SESSION})

    assert response.status_code == 200
    body = response.json()
    assert (body["session_key"], body["tasks_created"], body["synced"]) == (SESSION, 1, 1)
    assert Task.objects.get().external_id == f"task-{SESSION}-backend"
    queued.assert_not_called()


def test_wait_without_a_session_is_refused(staff_client, queued):
    response = post_json(staff_client, f"{SYNC}?wait=true", {})

    assert "needs a session" in assert_json_error(response, 400)["message"]
    assert not Event.objects.exists()


# --- GET /sync/issues/ --------------------------------------------------------------------------


@pytest.fixture
def issues(db):
    from board.sync import state_sync

    write_file(f"{SESSION}/backend.json", "{broken")
    write_file("session-other/qa.json", "[]")
    write_file(f"{SESSION}/fixed.json", "{")
    state_sync()
    write_file(f"{SESSION}/fixed.json", '{"task": "Now fine"}')
    state_sync()
    return SyncIssue.objects.all()


def test_staff_and_orchestrators_list_open_issues(staff_client, orchestrator_client, issues):
    for client in (staff_client, orchestrator_client):
        response = client.get(ISSUES)

        assert response.status_code == 200
        body = response.json()
        assert {row["path"] for row in body["results"]} == {f"{SESSION}/backend.json", "session-other/qa.json"}
        row = next(r for r in body["results"] if r["path"] == f"{SESSION}/backend.json")
        assert row["occurrences"] == 2
        assert row["resolved_at"] is None
        assert row["source"] == "state"
        assert "not valid JSON" in row["error"]


def test_issues_of_one_session_and_resolved_ones(staff_client, issues):
    one = staff_client.get(ISSUES, {"session": "session-other"}).json()["results"]
    resolved = staff_client.get(ISSUES, {"resolved": "true"}).json()["results"]

    assert [row["path"] for row in one] == ["session-other/qa.json"]
    assert [row["path"] for row in resolved] == [f"{SESSION}/fixed.json"]


def test_the_issue_list_costs_the_same_queries_for_many_issues(staff_client, django_assert_max_num_queries):
    from board.sync import state_sync

    for n in range(40):
        write_file(f"session-{n}/backend.json", "{")
    state_sync()

    with django_assert_max_num_queries(6):
        response = staff_client.get(ISSUES)
    assert response.json()["count"] == 40


def test_a_plain_agent_may_not_read_issues(agent_client, issues):
    assert_json_error(agent_client.get(ISSUES), 403)


def test_bad_issue_filters_are_400(staff_client):
    assert_json_error(staff_client.get(ISSUES, {"resolved": "maybe"}), 400)
    assert_json_error(staff_client.get(ISSUES, {"session": "../x"}), 400)


# --- GET /sync/drift/ ---------------------------------------------------------------------------


def test_staff_read_the_drift_report(staff_client):
    from board.sync import state_sync

    snapshot("backend", {"task": "A", "status": "running"})
    state_sync()
    snapshot("frontend", {"task": "B", "status": "running"})

    response = staff_client.get(DRIFT)

    assert response.status_code == 200
    body = response.json()
    assert body["unsynced_files"] == [
        {"path": f"{SESSION}/frontend.json", "session": SESSION, "reason": "new", "error": ""}
    ]
    assert (body["missing_files"], body["status_mismatches"], body["files"]) == ([], [], 2)


@pytest.mark.parametrize("client_name", ["agent_client", "orchestrator_client"])
def test_agents_may_not_read_the_drift_report(request, client_name):
    client = request.getfixturevalue(client_name)

    assert_json_error(client.get(DRIFT), 403)
