"""POST /tasks/{id}/runs/, GET /runs/, GET /runs/{id}/, POST /runs/{id}/cancel/."""

import pytest

from ledger.models import Event
from runners.models import Run

pytestmark = pytest.mark.django_db
S = Run.Status


def _state():
    return list(Run.objects.order_by("pk").values()), Event.objects.count()


def test_an_orchestrator_queues_a_run_of_a_task(orchestrator_client, task):
    # when
    response = orchestrator_client.post(f"/api/v1/tasks/{task.pk}/runs/", {"provider": "claude"}, format="json")

    # then
    assert response.status_code == 201
    run = Run.objects.get()
    body = response.json()
    assert {k: body[k] for k in ("id", "task", "provider", "status", "attempt", "runner", "session", "prompt")} == {
        "id": run.pk,
        "task": task.pk,
        "provider": "claude",
        "status": "queued",
        "attempt": 1,
        "runner": None,
        "session": None,
        "prompt": "Fix the login bug\n\nUsers are logged out after 5 minutes.",
    }
    assert list(Event.objects.values_list("name", "actor")) == [("run.queued", "agent:orchestrator")]


def test_staff_may_queue_with_a_prompt_of_their_own(staff_client, task):
    response = staff_client.post(
        f"/api/v1/tasks/{task.pk}/runs/", {"provider": "codex", "prompt": "Only the tests."}, format="json"
    )

    assert response.status_code == 201
    assert Run.objects.values_list("provider", "prompt").get() == ("codex", "Only the tests.")


def test_a_plain_agent_may_not_queue_and_nothing_is_written(agent_client, task):
    before = _state()

    response = agent_client.post(f"/api/v1/tasks/{task.pk}/runs/", {"provider": "claude"}, format="json")

    assert response.status_code == 403
    assert response.json()["message"] == "Queueing runs needs staff or an agent key with the 'orchestrate' scope."
    assert _state() == before


def test_a_second_active_run_is_409_and_nothing_is_written(orchestrator_client, task):
    first = orchestrator_client.post(f"/api/v1/tasks/{task.pk}/runs/", {"provider": "claude"}, format="json").json()
    before = _state()

    response = orchestrator_client.post(f"/api/v1/tasks/{task.pk}/runs/", {"provider": "claude"}, format="json")

    assert response.status_code == 409
    assert response.json()["message"] == f"Task {task.pk} already has an active run ({first['id']}); cancel it first."
    assert _state() == before


@pytest.mark.parametrize(
    ("body", "field"),
    [({}, "provider"), ({"provider": "claude code"}, "provider"), ({"provider": " claude"}, "provider")],
)
def test_bad_input_is_400_naming_the_field_and_nothing_is_written(orchestrator_client, task, body, field):
    before = _state()

    response = orchestrator_client.post(f"/api/v1/tasks/{task.pk}/runs/", body, format="json")

    assert response.status_code == 400
    assert list(response.json()["errors"]) == [field]
    assert _state() == before


def test_a_missing_task_is_404(orchestrator_client):
    response = orchestrator_client.post("/api/v1/tasks/999999/runs/", {"provider": "claude"}, format="json")

    assert (response.status_code, response.json()["message"]) == (404, "Task 999999 not found.")
    assert Run.objects.count() == 0


def test_runs_are_listed_newest_first_and_filtered(agent_client, make_run, django_assert_num_queries):
    queued, running, done = make_run(S.QUEUED), make_run(S.RUNNING), make_run(S.SUCCEEDED)

    # The first request of a key writes its last-used time; later ones within a minute don't.
    agent_client.get("/api/v1/runs/")
    with django_assert_num_queries(3):  # key, count, page (task, runner and session joined)
        everything = agent_client.get("/api/v1/runs/").json()
    active = agent_client.get("/api/v1/runs/", {"status": ["queued", "running"]}).json()
    on_build_1 = agent_client.get("/api/v1/runs/", {"runner": "build-1"}).json()
    of_task = agent_client.get("/api/v1/runs/", {"task": queued.task_id}).json()

    assert [r["id"] for r in everything["results"]] == [done.pk, running.pk, queued.pk]
    assert [r["id"] for r in active["results"]] == [running.pk, queued.pk]
    assert [r["id"] for r in on_build_1["results"]] == [done.pk, running.pk]
    assert [r["id"] for r in of_task["results"]] == [queued.pk]
    assert everything["results"][1]["runner"] == "build-1"


def test_a_run_is_read_by_id(agent_client, make_run):
    run = make_run(S.RUNNING)

    body = agent_client.get(f"/api/v1/runs/{run.pk}/").json()

    assert (body["id"], body["status"], body["runner"], body["attempt"]) == (run.pk, "running", "build-1", 1)
    assert body["started_at"] is not None
    assert agent_client.get("/api/v1/runs/999999/").status_code == 404


def test_cancel_ends_a_queued_run_and_asks_a_running_one(orchestrator_client, make_run):
    queued, running = make_run(S.QUEUED), make_run(S.RUNNING)

    first = orchestrator_client.post(f"/api/v1/runs/{queued.pk}/cancel/", {}, format="json")
    second = orchestrator_client.post(f"/api/v1/runs/{running.pk}/cancel/", {}, format="json")

    assert (first.status_code, first.json()["status"], first.json()["cancel_requested_at"]) == (200, "cancelled", None)
    assert (second.status_code, second.json()["status"]) == (200, "running")
    assert second.json()["cancel_requested_at"] is not None


def test_cancelling_an_ended_run_is_409_and_changes_nothing(orchestrator_client, make_run):
    done = make_run(S.SUCCEEDED)
    before = _state()

    response = orchestrator_client.post(f"/api/v1/runs/{done.pk}/cancel/", {}, format="json")

    assert (response.status_code, response.json()["message"]) == (409, f"Run {done.pk} has already ended (succeeded).")
    assert _state() == before


def test_a_plain_agent_may_not_cancel_and_nothing_changes(agent_client, make_run):
    run = make_run(S.QUEUED)
    before = _state()

    response = agent_client.post(f"/api/v1/runs/{run.pk}/cancel/", {}, format="json")

    assert response.status_code == 403
    assert _state() == before
