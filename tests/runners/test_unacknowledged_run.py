"""A run handed out and never acknowledged goes back to the queue (issue 24, §1; README's
acknowledgement rule): a runner that reports a run failed before it reported it starting (it had no
record of it: killed right after its long poll answered, restarted with the same root) hands it
back, attempt + 1, for any runner, and the card says so. A runner that never says anything loses
it the same way when the short assignment lease lapses."""

from datetime import timedelta

import pytest
from django.utils import timezone

from board.live import board_cards_render
from board.models import Task, TaskClaim
from config.pages import PRODUCT_OWNERS
from ledger.models import Event
from runners.leases import runs_expire_leases
from runners.models import Run
from tests.page_users import user_in
from tests.runners.runner_clients import next_runs, report

pytestmark = pytest.mark.django_db

NO_RECORD = "runner build-1 lost track of this run (no local state); queue it again"


def _card(task_id: int) -> str:
    html = board_cards_render(task_ids=[task_id])["html"]
    return html.split(f'id="task-{task_id}"')[1].split("</li>\n")[0]


def test_a_run_its_runner_had_no_record_of_goes_back_to_the_queue_for_any_runner(
    queue_run, runner_client, other_runner_client
):
    # given a run handed to build-1, whose runner was then restarted without its record of it
    run = queue_run()
    assert [r["id"] for r in next_runs(runner_client).json()["runs"]] == [run.pk]

    # when build-1 reports it failed, as a runner does of a held run it knows nothing of
    response = report(runner_client, run.pk, "failed", error=NO_RECORD)

    # then it is queued again as attempt 2, held by nobody, saying why; the task waits for it
    assert response.status_code == 200, response.json()
    assert response.json()["run"]["status"] == "queued"
    stored = Run.objects.get(pk=run.pk)
    assert (stored.status, stored.attempt, stored.runner_id, stored.agent_id, stored.ended_at) == (
        "queued",
        2,
        None,
        None,
        None,
    )
    assert stored.error.startswith("Handed to runner build-1 (attempt 1), not acknowledged: its runner reported")
    assert "no local state" in stored.error and stored.error.endswith("queued again.")
    task = Task.objects.get(pk=run.task_id)
    assert (task.status, task.assignee_id, TaskClaim.objects.filter(task=task).exists()) == ("ready", None, False)
    assert not Event.objects.filter(name="run.finished", subject_id=str(run.pk)).exists()
    # and the old attempt is fenced out, while another runner takes the run and starts it
    assert report(runner_client, run.pk, "starting", attempt=1).json()["code"] == "lease_lost"
    assert [(r["id"], r["attempt"]) for r in next_runs(other_runner_client).json()["runs"]] == [(run.pk, 2)]
    started = report(other_runner_client, run.pk, "starting", attempt=2)
    assert started.status_code == 200, started.json()
    # acknowledged: the note is done with
    assert Run.objects.get(pk=run.pk).error == ""


def test_the_card_and_the_panel_say_the_run_was_queued_again(queue_run, runner_client, client):
    run = queue_run()
    next_runs(runner_client)
    report(runner_client, run.pk, "failed", error=NO_RECORD)

    card = _card(run.task_id)
    assert "queued again</span>" in card
    assert 'title="Handed to runner build-1 (attempt 1), not acknowledged: its runner reported' in card
    client.force_login(user_in(PRODUCT_OWNERS, username="olivia"))
    panel = client.get(f"/runners/tasks/{run.task_id}/run/").content.decode()
    assert '<p class="message run-requeued" role="status">Handed to runner build-1 (attempt 1)' in panel


def test_a_plain_queued_run_keeps_the_plain_badge(queue_run):
    run = queue_run()
    assert 'title="A run waits for a runner">queued</span>' in _card(run.task_id)


def test_after_the_last_attempt_the_failure_stands(queue_run, runner_client, settings):
    settings.RUNNER_UNACKNOWLEDGED_MAX_ATTEMPTS = 2
    run = queue_run()
    for attempt in (1, 2):
        next_runs(runner_client)
        assert report(runner_client, run.pk, "failed", attempt=attempt, error=NO_RECORD).status_code == 200

    stored = Run.objects.get(pk=run.pk)
    assert (stored.status, stored.attempt) == ("failed", 2)
    assert stored.error == f"{NO_RECORD}\nFailed before it started, at attempt 2: not queued again."
    assert Run.objects.filter(task_id=run.task_id).count() == 1


def test_an_assignment_whose_lease_lapsed_is_queued_again_saying_so(queue_run, runner_client, settings):
    run = queue_run()
    next_runs(runner_client)

    runs_expire_leases(now=timezone.now() + timedelta(seconds=61))

    stored = Run.objects.get(pk=run.pk)
    assert (stored.status, stored.attempt) == ("queued", 2)
    assert stored.error == (
        f"Handed to runner build-1 (attempt 1), not acknowledged: not started within "
        f"{settings.RUNNER_ASSIGN_ACK_SECONDS} s; queued again."
    )
    assert "queued again</span>" in _card(run.task_id)
