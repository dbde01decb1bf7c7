"""A run that waits for a person holds no process (issue 26 §2), through the runner protocol and the
API: the runner reports ``waiting`` after its agent deferred a tool call, the run frees its runner's
capacity and keeps its task, the answer hands it back to that runner only (with the decision), a
second answer or one after a cancel is a 409 naming the run's state, a run whose runner is gone
stays waiting until a person re-queues it elsewhere or cancels it. Nothing expires a waiting run."""

from datetime import timedelta

import pytest
from django.utils import timezone

from board.models import Task
from composition.reaper import agents_reap_stale
from config.actors import Actor
from config.pages import PRODUCT_OWNERS
from ledger.models import Event
from runners.leases import runs_expire_leases
from runners.models import Run, Runner
from sessions_app.input_requests import session_answer_input
from sessions_app.models import AgentApiKey, AgentSession, StreamEvent
from tests.factories import UserFactory
from tests.page_users import user_in
from tests.runners.runner_clients import client_with_key, next_runs, report, take_and_start, world_state

pytestmark = pytest.mark.django_db
S = Run.Status


def _ask(started: dict, *, tool: str = "Write", choices=("allow", "deny")) -> int:
    """What the hook does before it defers: the question, then the session waits for input."""
    agent = client_with_key(started["agent_key"])
    sid = started["session"]
    payload = {"hook": "PermissionRequest", "tool_name": tool, "question": f"Allow {tool}?", "choices": list(choices)}
    event = {"id": "q-1", "type": "input_request", "payload": payload, "timestamp": timezone.now().isoformat()}
    assert agent.post(f"/api/v1/sessions/{sid}/events/", event, format="json").status_code in (200, 201)
    moved = agent.post(f"/api/v1/sessions/{sid}/transition/", {"status": "waiting_for_input"}, format="json")
    assert moved.status_code == 200, moved.json()
    return StreamEvent.objects.get(session_id=sid, client_id="q-1").seq


DEFERRED = {"tool_use_id": "toolu_01", "tool_name": "Write"}


@pytest.fixture
def waiting(runner_client, queue_run):
    """A claude run on build-1 whose agent asked for Write and deferred it: reported waiting."""
    run = queue_run(provider="claude")
    started = take_and_start(runner_client, run)
    assert report(runner_client, run.pk, "running", pid=4242, agent_session="cc-uuid-1").status_code == 200
    seq = _ask(started)
    response = report(runner_client, run.pk, "waiting", deferred=DEFERRED, exit_code=0)
    assert response.status_code == 200, response.json()
    run.refresh_from_db()
    run.question_seq = seq
    run.started = started
    return run


def _allow(run: Run, decision: str = "allow", message: str = "") -> None:
    """A person answers on the card or the session page (the same service)."""
    person = Actor(user=UserFactory(username="olivia", is_staff=True))
    session = AgentSession.objects.get(pk=run.session_id)
    session_answer_input(actor=person, session=session, answer=message, decision=decision)


def test_a_deferred_run_waits_without_a_process_and_frees_its_runners_capacity(waiting, runner_client, queue_run):
    run = waiting
    assert run.status == S.WAITING
    assert run.waiting_for == {
        "kind": "permission",
        "question": "Allow Write?",
        "question_seq": run.question_seq,
        "tool_use_id": "toolu_01",
        "tool_name": "Write",
        "runner": "build-1",
    }
    assert (run.pid, run.lease_expires_at, run.answered_at, run.answer) == (None, None, None, {})
    assert run.agent_session == "cc-uuid-1" and run.exit_code == 0
    # Its task and session stay the run's; no key is left for an agent that is gone.
    task = Task.objects.get(pk=run.task_id)
    assert (task.status, task.assignee_id) == (Task.Status.IN_PROGRESS, run.agent_id)
    assert AgentSession.objects.get(pk=run.session_id).status == AgentSession.Status.WAITING_FOR_INPUT
    assert not AgentApiKey.objects.filter(session_id=run.session_id, revoked_at__isnull=True).exists()
    assert Event.objects.filter(name="run.waiting", subject_id=str(run.pk)).count() == 1
    # Its capacity is free: build-1 (capacity 1 now) takes the next run, and holds only that one.
    Runner.objects.filter(name="build-1").update(capacity=1)
    other = queue_run(provider="claude")
    assert [r["id"] for r in next_runs(runner_client).json()["runs"]] == [other.pk]
    beat = runner_client.post("/api/v1/runners/me/heartbeat/", {"runs": []}, format="json").json()
    assert [held["id"] for held in beat["held"]] == [other.pk]


def test_the_same_waiting_report_again_changes_nothing(waiting, runner_client):
    before = world_state()

    again = report(runner_client, waiting.pk, "waiting", deferred=DEFERRED, exit_code=0)

    assert again.status_code == 200 and again.json()["run"]["status"] == "waiting"
    assert world_state() == before


def test_a_run_cannot_wait_without_a_question_anyone_could_answer(runner_client, queue_run):
    run = queue_run(provider="claude")
    take_and_start(runner_client, run)
    report(runner_client, run.pk, "running")
    before = world_state()

    response = report(runner_client, run.pk, "waiting", deferred=DEFERRED)

    assert response.status_code == 409
    assert response.json()["message"] == (
        f"Run {run.pk} cannot wait: its session has no Allow / Deny question for a person to answer; "
        "report how it ended instead."
    )
    assert world_state() == before


def test_deferred_goes_with_waiting_only(waiting, runner_client, queue_run):
    run = queue_run(provider="claude")
    take_and_start(runner_client, run)
    before = world_state()

    response = report(runner_client, run.pk, "running", deferred=DEFERRED)

    assert response.status_code == 400 and "deferred" in response.json()["message"]
    assert world_state() == before


def test_nothing_expires_a_waiting_run_however_late(waiting):
    later = timezone.now() + timedelta(days=3)

    runs_expire_leases(now=later)
    agents_reap_stale(now=later)

    waiting.refresh_from_db()
    assert (waiting.status, waiting.attempt) == (S.WAITING, 1)


def test_the_answer_hands_it_back_to_its_runner_only_with_the_decision(waiting, runner_client, other_runner_client):
    _allow(waiting, message="Fine, write it.")

    waiting.refresh_from_db()
    assert waiting.status == S.WAITING and waiting.answered_at is not None
    assert waiting.answer == {"decision": "allow", "message": "Fine, write it.", "answered_by": "olivia"}
    assert next_runs(other_runner_client).json()["runs"] == []  # its session is on build-1's disk
    (handed,) = next_runs(runner_client).json()["runs"]
    assert (handed["id"], handed["attempt"]) == (waiting.pk, 2)
    assert handed["deferred"] == {
        "tool_use_id": "toolu_01",
        "tool_name": "Write",
        "kind": "permission",
        "decision": "allow",
        "message": "Fine, write it.",
        "answered_by": "olivia",
        "agent_session": "cc-uuid-1",
        "workdir": "",
        "log_path": "",
    }
    # The resume starts as any start: a new key for the same session, then running.
    started = report(runner_client, waiting.pk, "starting", attempt=2)
    assert started.status_code == 200, started.json()
    assert started.json()["session"] == waiting.session_id and started.json()["agent_key"]
    assert report(runner_client, waiting.pk, "running", attempt=2).status_code == 200
    assert report(runner_client, waiting.pk, "succeeded", attempt=2, exit_code=0).status_code == 200


def test_an_answer_given_before_the_waiting_report_resumes_it_at_once(runner_client, queue_run):
    run = queue_run(provider="claude")
    started = take_and_start(runner_client, run)
    report(runner_client, run.pk, "running")
    _ask(started)
    run.refresh_from_db()
    _allow(run, decision="deny", message="No.")

    assert report(runner_client, run.pk, "waiting", deferred=DEFERRED).status_code == 200

    run.refresh_from_db()
    assert run.answer["decision"] == "deny" and run.answered_at is not None
    assert [r["id"] for r in next_runs(runner_client).json()["runs"]] == [run.pk]


def test_a_resume_never_acknowledged_waits_again_for_its_own_runner(waiting, runner_client, other_runner_client):
    _allow(waiting)
    next_runs(runner_client)  # handed out, and the answer lost on the way

    runs_expire_leases(now=timezone.now() + timedelta(minutes=10))

    waiting.refresh_from_db()
    assert (waiting.status, waiting.attempt, waiting.answered_at is not None) == (S.WAITING, 2, True)
    assert next_runs(other_runner_client).json()["runs"] == []
    assert [r["id"] for r in next_runs(runner_client).json()["runs"]] == [waiting.pk]


def test_an_answer_by_the_api_twice_is_a_409_naming_the_runs_state(waiting, orchestrator_client):
    first = orchestrator_client.post(f"/api/v1/runs/{waiting.pk}/answer/", {"decision": "allow"}, format="json")
    assert first.status_code == 200, first.json()
    assert first.json()["answer"]["decision"] == "allow"
    before = world_state()

    second = orchestrator_client.post(f"/api/v1/runs/{waiting.pk}/answer/", {"decision": "deny"}, format="json")

    assert second.status_code == 409
    assert second.json()["message"] == (
        f"Run {waiting.pk} is waiting, answered already (allow by agent:orchestrator): it waits for no answer."
    )
    assert world_state() == before


def test_an_answer_after_the_run_was_cancelled_is_a_409_naming_its_state(waiting, orchestrator_client):
    cancelled = orchestrator_client.post(f"/api/v1/runs/{waiting.pk}/cancel/", {}, format="json")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    # No agent to stop: it ended at once, its task given back, its session cancelled.
    task = Task.objects.get(pk=waiting.task_id)
    assert (task.status, task.assignee_id) == (Task.Status.READY, None)
    assert AgentSession.objects.get(pk=waiting.session_id).status == AgentSession.Status.CANCELLED
    before = world_state()

    response = orchestrator_client.post(f"/api/v1/runs/{waiting.pk}/answer/", {"decision": "allow"}, format="json")

    assert response.status_code == 409
    assert response.json()["message"] == f"Run {waiting.pk} is cancelled: it waits for no answer."
    assert world_state() == before


def test_another_agent_may_not_answer_requeue_or_cancel_and_nothing_changes(waiting, agent_client, runner_client):
    before = world_state()

    for path, body in (("answer", {"decision": "allow"}), ("requeue", {}), ("cancel", {})):
        response = agent_client.post(f"/api/v1/runs/{waiting.pk}/{path}/", body, format="json")
        assert response.status_code == 403, (path, response.json())
        # Nor the runner holding it: a person decides.
        response = runner_client.post(f"/api/v1/runs/{waiting.pk}/{path}/", body, format="json")
        assert response.status_code == 403, (path, response.json())

    assert world_state() == before


def test_a_bad_decision_is_a_400_and_nothing_changes(waiting, orchestrator_client):
    before = world_state()

    response = orchestrator_client.post(f"/api/v1/runs/{waiting.pk}/answer/", {"decision": "maybe"}, format="json")

    assert response.status_code == 400 and "decision" in response.json()["message"]
    assert world_state() == before


def test_its_runner_gone_it_stays_waiting_until_it_returns(waiting, runner_client, other_runner_client, client):
    Runner.objects.filter(name="build-1").update(status=Runner.Status.OFFLINE)
    _allow(waiting)

    assert next_runs(other_runner_client).json()["runs"] == []
    waiting.refresh_from_db()
    assert waiting.status == S.WAITING
    # The card's panel says whom it waits for.
    client.force_login(user_in(PRODUCT_OWNERS, username="olga"))
    html = client.get(f"/runners/tasks/{waiting.task_id}/run/", HTTP_HX_REQUEST="true").content.decode()
    assert "Waiting for runner build-1" in html
    # Back: its next poll takes it.
    assert [r["id"] for r in next_runs(runner_client).json()["runs"]] == [waiting.pk]


def test_a_person_requeues_it_elsewhere_to_start_afresh(waiting, orchestrator_client, other_runner_client):
    Runner.objects.filter(name="build-1").update(status=Runner.Status.OFFLINE)
    old_session, old_agent = waiting.session_id, waiting.agent_id

    response = orchestrator_client.post(f"/api/v1/runs/{waiting.pk}/requeue/", {}, format="json")

    assert response.status_code == 200, response.json()
    body = response.json()
    assert (body["status"], body["attempt"], body["runner"], body["session"]) == ("queued", 2, None, None)
    assert body["waiting_for"] == {} and body["agent_session"] == ""
    task = Task.objects.get(pk=waiting.task_id)
    assert (task.status, task.assignee_id) == (Task.Status.READY, None)
    assert AgentSession.objects.get(pk=old_session).status == AgentSession.Status.CANCELLED
    # build-2 takes it as a fresh run: a session and an agent of its own.
    (handed,) = next_runs(other_runner_client).json()["runs"]
    assert (handed["id"], handed["deferred"]) == (waiting.pk, None)
    started = report(other_runner_client, waiting.pk, "starting", attempt=2)
    assert started.status_code == 200, started.json()
    waiting.refresh_from_db()
    assert waiting.session_id not in (None, old_session) and waiting.agent_id != old_agent


def test_only_a_waiting_run_is_requeued(runner_client, queue_run, orchestrator_client):
    run = queue_run(provider="claude")
    take_and_start(runner_client, run)
    before = world_state()

    response = orchestrator_client.post(f"/api/v1/runs/{run.pk}/requeue/", {}, format="json")

    assert response.status_code == 409
    assert response.json()["message"] == f"Run {run.pk} is starting, not waiting: only a waiting run is re-queued."
    assert world_state() == before


def test_a_person_requeues_it_from_the_card_and_the_box_says_it_is_queued(waiting, client):
    Runner.objects.filter(name="build-1").update(status=Runner.Status.OFFLINE)
    client.force_login(user_in(PRODUCT_OWNERS, username="olga"))
    box = client.get(f"/runners/tasks/{waiting.task_id}/run/", HTTP_HX_REQUEST="true").content.decode()
    assert f'action="/runners/runs/{waiting.pk}/requeue/"' in box and "Re-queue on any runner" in box

    response = client.post(f"/runners/runs/{waiting.pk}/requeue/", HTTP_HX_REQUEST="true")

    assert response.status_code == 200
    waiting.refresh_from_db()
    assert (waiting.status, waiting.attempt, waiting.runner_id) == (S.QUEUED, 2, None)
    html = response.content.decode()
    assert "Waiting for a runner that offers" in html and "Re-queue on any runner" not in html


def test_the_cards_requeue_is_refused_in_the_box_when_the_run_does_not_wait(runner_client, queue_run, client):
    run = queue_run(provider="claude")
    take_and_start(runner_client, run)
    client.force_login(user_in(PRODUCT_OWNERS, username="olga"))
    before = world_state()

    response = client.post(f"/runners/runs/{run.pk}/requeue/", HTTP_HX_REQUEST="true")

    assert response.status_code == 200
    assert f"Run {run.pk} is starting, not waiting: only a waiting run is re-queued." in response.content.decode()
    assert world_state() == before


def test_people_outside_the_board_may_not_requeue_from_the_card(waiting, client):
    before = world_state()
    client.force_login(UserFactory(username="visitor"))
    assert client.post(f"/runners/runs/{waiting.pk}/requeue/", HTTP_HX_REQUEST="true").status_code == 403
    client.logout()
    assert client.post(f"/runners/runs/{waiting.pk}/requeue/").status_code == 302  # to the login page
    assert world_state() == before
