"""POST /api/v1/runs/{id}/status/: the holder reports a run starting, running, and how it ended; the
session, the task's claim and the per-run key follow."""

import pytest

from board.models import Task, TaskClaim
from config.actors import SYSTEM
from config.api.errors import LEASE_LOST
from ledger.models import Event
from runners.models import Run
from runners.services import run_cancel, run_queue, run_requeue_lost, run_transition
from sessions_app.models import AgentApiKey, AgentSession, Milestone
from tests.runners.runner_clients import client_with_key, next_runs, report, take_and_start, world_state

pytestmark = pytest.mark.django_db
S = Run.Status


@pytest.fixture
def run(queue_run):
    return queue_run(title="Fix the login bug", description="Logged out after 5 minutes.")


def _running(client, run) -> dict:
    started = take_and_start(client, run)
    assert report(client, run.pk, "running", pid=4242, workdir="/srv/wt/bugfix-1").status_code == 200
    return started


def test_starting_opens_the_session_claims_the_task_and_mints_a_per_run_key(runner_client, run):
    next_runs(runner_client)

    response = report(runner_client, run.pk, "starting", log_path="running-jobs/job-20260101-000000-1.log")

    assert response.status_code == 200
    body = response.json()
    stored = Run.objects.select_related("session", "agent", "task").get(pk=run.pk)
    session = stored.session
    # the run's session: its agent's, on its task, running
    assert (body["attempt"], body["session"], body["resume"]) == (1, session.pk, None)
    assert (session.agent.slug, session.task_id, session.intent, session.labels, session.status) == (
        "demo-at-build-1",
        run.task_id,
        "Fix the login bug",
        ["run"],
        "running",
    )
    assert (body["run"]["status"], body["run"]["session"], body["run"]["agent"]) == (
        "starting",
        session.pk,
        "demo-at-build-1",
    )
    assert stored.log_path == "running-jobs/job-20260101-000000-1.log"
    # the task claimed by the run's agent under that session
    task = stored.task
    assert (task.status, task.assignee.slug, task.session_id) == ("in_progress", "demo-at-build-1", session.pk)
    assert TaskClaim.objects.filter(task=task, released_at__isnull=True, agent=stored.agent).exists()
    # a key of scope agent, for the run's agent, bound to the session
    key = AgentApiKey.objects.get(session=session)
    assert (key.agent_id, key.scopes, key.revoked_at) == (stored.agent_id, ["agent"], None)
    assert body["agent_key"].startswith(f"sy_{key.prefix}_")
    assert client_with_key(body["agent_key"]).get(f"/api/v1/sessions/{session.pk}/").status_code == 200


def test_running_sets_the_pid_and_the_start_time(runner_client, run):
    take_and_start(runner_client, run)

    response = report(runner_client, run.pk, "running", pid=4242, workdir="/srv/wt/bugfix-1")

    assert response.status_code == 200
    assert set(response.json()) == {"run"}
    stored = Run.objects.get(pk=run.pk)
    assert (stored.status, stored.pid, stored.workdir) == ("running", 4242, "/srv/wt/bugfix-1")
    assert stored.started_at is not None
    assert Event.objects.filter(name="run.started", subject_id=str(run.pk)).count() == 1


def test_succeeded_moves_the_task_to_review_with_the_summary_and_ends_the_rest(runner_client, run):
    started = _running(runner_client, run)
    summary = {
        "commits_ahead": 2,
        "files_changed": ["a.py", "b.py"],
        "patch": "run-1.patch",
        "artifacts": ["report.md"],
    }

    response = report(runner_client, run.pk, "succeeded", exit_code=0, summary=summary)

    assert response.status_code == 200
    stored = Run.objects.select_related("task", "session").get(pk=run.pk)
    assert (stored.status, stored.exit_code, stored.summary) == ("succeeded", 0, summary)
    # the task went to review, its claim completed
    assert (stored.task.status, stored.task.finished_at is not None) == ("review", True)
    assert TaskClaim.objects.get(task=stored.task).outcome == "completed"
    # the summary is in the ledger and a milestone of the session
    finished = Event.objects.get(name="run.finished", subject_id=str(run.pk))
    assert finished.payload["summary"] == summary
    assert Milestone.objects.get(session=stored.session).text == (
        "Run finished: 2 commit(s) ahead, 2 file(s) changed (a.py, b.py), patch run-1.patch, work products: report.md"
    )
    assert Event.objects.filter(name="task.moved", subject_id=str(stored.task_id), payload__to="review").exists()
    # the session completed, the key revoked
    assert stored.session.status == "completed"
    assert AgentApiKey.objects.get(session=stored.session).revoked_at is not None
    assert client_with_key(started["agent_key"]).get(f"/api/v1/sessions/{stored.session_id}/").status_code == 401


def test_failed_fails_the_task_with_the_exit_code_and_the_log_lines(runner_client, run):
    _running(runner_client, run)

    response = report(runner_client, run.pk, "failed", exit_code=3, error="Traceback...\nValueError: boom")

    assert response.status_code == 200
    stored = Run.objects.select_related("task", "session").get(pk=run.pk)
    assert (stored.status, stored.exit_code, stored.error) == ("failed", 3, "Traceback...\nValueError: boom")
    assert (stored.task.status, stored.task.error) == ("failed", "exit code 3\nTraceback...\nValueError: boom")
    assert TaskClaim.objects.get(task=stored.task).outcome == "failed"
    assert stored.session.status == "failed"
    assert AgentApiKey.objects.get(session=stored.session).revoked_at is not None


def test_a_failed_task_run_again_is_claimed_by_the_new_run(runner_client, run, person):
    # given a run that failed, its task in Failed with the run's agent still shown on the card
    _running(runner_client, run)
    report(runner_client, run.pk, "failed", exit_code=1, error="boom")
    run.refresh_from_db()
    assert Task.objects.values_list("status", "assignee").get(pk=run.task_id) == ("failed", run.agent_id)

    # when a person presses Run again: the card goes back to Ready, unassigned
    again = run_queue(actor=person, task=Task.objects.get(pk=run.task_id), provider="demo")
    assert Task.objects.values_list("status", "assignee", "session").get(pk=run.task_id) == ("ready", None, None)

    # then the same runner's agent starts it and claims the task again
    started = take_and_start(runner_client, again)
    again.refresh_from_db()
    task = Task.objects.get(pk=run.task_id)
    assert (task.status, task.assignee_id, task.session_id) == ("in_progress", again.agent_id, started["session"])
    assert list(TaskClaim.objects.filter(task=task).order_by("id").values_list("outcome", flat=True)) == [
        "failed",
        "open",
    ]


def test_a_run_that_could_not_start_fails_without_a_session(runner_client, run, settings):
    # Never acknowledged, it would go back to the queue (test_unacknowledged_run.py) up to this attempt.
    settings.RUNNER_UNACKNOWLEDGED_MAX_ATTEMPTS = 1
    next_runs(runner_client)

    response = report(runner_client, run.pk, "failed", error="git worktree add: no such repository")

    assert response.status_code == 200
    stored = Run.objects.select_related("task").get(pk=run.pk)
    assert (stored.status, stored.session_id, stored.task.status) == ("failed", None, "ready")


def test_cancelled_after_a_stop_gives_the_task_back_and_cancels_the_session(runner_client, run, person):
    _running(runner_client, run)
    run_cancel(actor=person, run=run)

    response = report(runner_client, run.pk, "cancelled", exit_code=-15)

    assert response.status_code == 200
    stored = Run.objects.select_related("task", "session").get(pk=run.pk)
    assert (stored.status, stored.task.status, stored.task.assignee_id) == ("cancelled", "ready", None)
    assert TaskClaim.objects.get(task=stored.task).outcome == "released"
    assert stored.session.status == "cancelled"
    assert AgentApiKey.objects.get(session=stored.session).revoked_at is not None


def test_a_cancel_leaves_the_task_where_the_person_put_it(runner_client, run, person):
    # given a running run whose card a person moved to review (which asked the run to stop)
    _running(runner_client, run)
    from board.services import task_complete

    task = Task.objects.get(pk=run.task_id)
    task_complete(actor=person, task=task, review=True)
    run_cancel(actor=person, run=run)

    # when the runner reports it stopped
    assert report(runner_client, run.pk, "cancelled").status_code == 200

    # then the task stays in review
    assert Task.objects.get(pk=run.task_id).status == "review"
    assert Run.objects.get(pk=run.pk).session.status == "cancelled"


def test_cancelled_without_a_stop_is_409_and_changes_nothing(runner_client, run):
    _running(runner_client, run)
    before = world_state()

    response = report(runner_client, run.pk, "cancelled")

    assert response.status_code == 409
    assert response.json()["message"] == f"Run {run.pk} was not asked to stop; report how it ended instead."
    assert world_state() == before


def test_staff_may_report_a_run_cancelled(runner_client, run, staff_client):
    _running(runner_client, run)

    response = report(staff_client, run.pk, "cancelled")

    assert response.status_code == 200
    assert Run.objects.get(pk=run.pk).status == "cancelled"


def test_the_same_end_reported_again_is_200_and_another_is_409(runner_client, run):
    _running(runner_client, run)
    report(runner_client, run.pk, "succeeded", exit_code=0)
    before = world_state()

    again = report(runner_client, run.pk, "succeeded", exit_code=0)
    other = report(runner_client, run.pk, "failed", exit_code=1)

    assert (again.status_code, again.json()["run"]["status"]) == (200, "succeeded")
    assert (other.status_code, other.json()["message"]) == (409, f"Run {run.pk} cannot go from succeeded to failed.")
    assert world_state() == before


def test_a_stale_attempt_is_409_lease_lost_and_changes_nothing(runner_client, run):
    # given a run handed out, handed back (attempt 2) and handed out again
    next_runs(runner_client)
    run_transition(actor=SYSTEM, run=run, to=S.QUEUED)
    next_runs(runner_client)
    before = world_state()

    # when the runner reports with attempt 1
    response = report(runner_client, run.pk, "starting", attempt=1)

    # then it hears it lost the lease
    assert response.status_code == 409
    assert (response.json()["code"], response.json()["attempt"]) == (LEASE_LOST, 2)
    assert world_state() == before


def test_another_runner_is_refused_and_nothing_changes(runner_client, other_runner_client, run):
    _running(runner_client, run)
    before = world_state()

    for status in ("running", "succeeded", "failed", "starting"):
        response = report(other_runner_client, run.pk, status)
        assert response.status_code == 403, status
        assert response.json()["message"] == f"Run {run.pk} is not held by this runner."
    assert world_state() == before


def test_keys_without_the_run_scope_are_refused_and_nothing_changes(
    runner_client, run, agent_client, make_agent_client
):
    started = _running(runner_client, run)
    own_agent_key = make_agent_client(runner_client.runner.agent)  # the runner's agent, scope 'agent'
    per_run = client_with_key(started["agent_key"])  # the run's own agent key
    before = world_state()

    for client in (agent_client, own_agent_key, per_run):
        assert report(client, run.pk, "succeeded", exit_code=0).status_code == 403
    assert world_state() == before


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"status": "running"}, "attempt"),
        ({"attempt": 1}, "status"),
        ({"attempt": 1, "status": "paused"}, "status"),
        ({"attempt": 1, "status": "queued"}, "status"),
        ({"attempt": 0, "status": "running"}, "attempt"),
        ({"attempt": 1, "status": "running", "pid": "x"}, "pid"),
        ({"attempt": 1, "status": "running", "pid": 2**40}, "pid"),
        ({"attempt": 1, "status": "succeeded", "summary": ["a.py"]}, "summary"),
        ({"attempt": 1, "status": "running", "runner": "build-2"}, "runner"),
    ],
)
def test_a_bad_body_is_400_json_and_changes_nothing(runner_client, run, body, field):
    next_runs(runner_client)
    before = world_state()

    response = runner_client.post(f"/api/v1/runs/{run.pk}/status/", body, format="json")

    assert response.status_code == 400
    assert field in response.json()["errors"]
    assert world_state() == before


SHAPE = (
    'Expected {"commits_ahead": an integer >= 0 or null, "files_changed": [file names], "patch": a file name of '
    'the session\'s files, "artifacts": [file names]}, each key optional.'
)


@pytest.mark.parametrize(
    ("summary", "problem"),
    [
        ({"files_changed": 5}, "files_changed: Must be a list."),
        ({"files_changed": "a.py"}, "files_changed: Must be a list."),
        ({"files_changed": [1, 2]}, "files_changed: Each item: must be a string."),
        ({"artifacts": {"a": 1}}, "artifacts: Must be a list."),
        ({"commits_ahead": "2"}, "commits_ahead: Must be an integer."),
        ({"commits_ahead": -1}, "commits_ahead: Ensure this value is greater than or equal to 0."),
        ({"patch": ["run-1.patch"]}, "patch: Must be a string."),
        ({"patch": "run-1.patch\nx"}, "patch: No control characters."),
        ({"files": ["a.py"]}, 'files: Unknown field "files"'),
        ("all good", "Invalid data. Expected a dictionary, but got str."),
    ],
)
def test_a_summary_of_the_wrong_shape_is_400_saying_the_shape_and_the_run_can_still_end(
    runner_client, run, summary, problem
):
    # given a running run
    _running(runner_client, run)
    before = world_state()

    # when its end is reported with a summary of the wrong shape
    response = report(runner_client, run.pk, "succeeded", exit_code=0, summary=summary)

    # then a 400 names the problem and the shape, and nothing changed
    assert response.status_code == 400, response.content
    message = response.json()["message"]
    assert message.startswith(f"Invalid input: summary: {problem}"), message
    assert message.endswith(SHAPE), message
    assert world_state() == before
    # and the end reported again with a good summary ends it
    good = {"commits_ahead": 1, "files_changed": ["a.py"], "patch": f"run-{run.pk}.patch", "artifacts": []}
    assert report(runner_client, run.pk, "succeeded", exit_code=0, summary=good).status_code == 200
    assert Run.objects.get(pk=run.pk).status == S.SUCCEEDED


def test_a_missing_run_is_404(runner_client):
    assert report(runner_client, 999999, "running").status_code == 404


def test_an_illegal_move_is_409(runner_client, run):
    next_runs(runner_client)
    before = world_state()

    response = report(runner_client, run.pk, "succeeded")

    assert (response.status_code, response.json()["status"]) == (409, "assigned")
    assert world_state() == before


def test_a_run_of_a_task_no_longer_ready_does_not_start_and_ends_failed(runner_client, run):
    next_runs(runner_client)
    Task.objects.filter(pk=run.task_id).update(status=Task.Status.BLOCKED)
    sessions, keys = AgentSession.objects.count(), AgentApiKey.objects.count()

    response = report(runner_client, run.pk, "starting")

    # It could never start: it ends (issue 24) instead of staying active, and nothing else is written.
    assert response.status_code == 409
    assert (response.json()["task_status"], response.json()["run_status"]) == ("blocked", "failed")
    assert Run.objects.get(pk=run.pk).status == "failed"
    assert Task.objects.get(pk=run.task_id).status == "blocked"
    assert (AgentSession.objects.count(), AgentApiKey.objects.count()) == (sessions, keys)


def test_a_restart_is_a_new_attempt_with_a_new_key_and_the_session_to_resume(runner_client, run):
    # given a running run whose agent and runner died
    first = _running(runner_client, run)
    session_id = first["session"]
    Milestone.objects.create(session=AgentSession.objects.get(pk=session_id), text="Tests written")

    # when the runner comes back and starts it again
    response = report(runner_client, run.pk, "starting", attempt=1)

    # then it is attempt 2 of the same session, with a run.resumed event and a fresh key
    assert response.status_code == 200
    body = response.json()
    assert (body["attempt"], body["session"], body["run"]["status"]) == (2, session_id, "starting")
    assert body["resume"]["session"]["id"] == session_id
    assert [m["text"] for m in body["resume"]["milestones"]] == ["Tests written"]
    assert [t["id"] for t in body["resume"]["claimed_tasks"]] == [run.task_id]
    assert Event.objects.filter(name="run.resumed", subject_id=str(run.pk)).count() == 1
    keys = AgentApiKey.objects.filter(session_id=session_id).order_by("pk")
    assert [k.revoked_at is None for k in keys] == [False, True]
    assert client_with_key(first["agent_key"]).get(f"/api/v1/sessions/{session_id}/").status_code == 401
    assert client_with_key(body["agent_key"]).get(f"/api/v1/sessions/{session_id}/").status_code == 200
    # and attempt 1 is fenced out from now on
    assert report(runner_client, run.pk, "running", attempt=1).json()["code"] == LEASE_LOST
    assert report(runner_client, run.pk, "running", attempt=2, pid=5).status_code == 200


def test_a_run_that_resumes_a_lost_one_starts_with_the_lost_sessions_packet(runner_client, run, queue_run):
    # given a run that was lost mid-way, and the run queued to resume it
    first = _running(runner_client, run)
    lost = run_transition(actor=SYSTEM, run=Run.objects.get(pk=run.pk), to=S.LOST)
    AgentSession.objects.filter(pk=first["session"]).update(status="failed")
    Task.objects.filter(pk=run.task_id).update(status="ready", assignee=None, session=None)
    TaskClaim.objects.filter(task_id=run.task_id).update(outcome="released", released_at=lost.ended_at)
    resume = run_requeue_lost(actor=SYSTEM, lost=lost)

    # when it starts
    body = take_and_start(runner_client, resume)

    # then it has a session of its own and the lost one's packet
    assert body["session"] != first["session"]
    assert body["resume"]["session"]["id"] == first["session"]
    assert body["attempt"] == 1


def test_a_run_handed_out_by_the_system_gets_its_agent_when_it_starts(runner_client, run):
    run_transition(actor=SYSTEM, run=run, to=S.ASSIGNED, runner=runner_client.runner)

    response = report(runner_client, run.pk, "starting")

    assert response.status_code == 200
    assert response.json()["run"]["agent"] == "demo-at-build-1"
    assert Task.objects.get(pk=run.task_id).assignee.slug == "demo-at-build-1"


def test_every_move_redraws_the_tasks_card(runner_client, run, monkeypatch):
    pushed: list[int] = []
    monkeypatch.setattr("runners.services.board_push_tasks", lambda task_ids: pushed.extend(task_ids))

    next_runs(runner_client)
    report(runner_client, run.pk, "starting")
    report(runner_client, run.pk, "running", pid=1)

    assert pushed == [run.task_id] * 3
