"""A run continuing another's agent session (kind continue, SPEC §10) goes to the runner that ran that
run while it is online (the session is on its disk), with the session id to resume in its
assignment; once that runner is offline, any runner takes it (and starts a fresh session). The
runner reports the provider's own session id with its status."""

import pytest

from config.actors import SYSTEM
from runners.models import Run, Runner
from runners.services import run_queue_follow_up, run_requeue_lost, run_transition
from tests.runners.runner_clients import next_runs, report, take_and_start

pytestmark = pytest.mark.django_db


@pytest.fixture
def finished(runner_client, person, queue_run):
    """A run build-1 ran to its end, reporting Claude Code's session id."""
    run = queue_run(provider="claude")
    take_and_start(runner_client, run)
    assert report(runner_client, run.pk, "running", agent_session="5f1e0c2a-uuid").status_code == 200
    assert report(runner_client, run.pk, "succeeded", exit_code=0).status_code == 200
    run.refresh_from_db()
    return run


def test_the_runner_that_ran_it_gets_the_continuation_with_the_session_to_resume(
    finished, person, runner_client, other_runner_client
):
    follow = run_queue_follow_up(actor=person, previous=finished, prompt="Also b.txt.")

    assert next_runs(other_runner_client).json()["runs"] == []  # left to build-1 while it is online
    handed = next_runs(runner_client).json()["runs"]

    assert finished.agent_session == "5f1e0c2a-uuid"
    assert [(r["id"], r["kind"], r["prompt"]) for r in handed] == [(follow.pk, "continue", "Also b.txt.")]
    assert handed[0]["resumes"] == {
        "id": finished.pk,
        "session": finished.session_id,
        "provider": "claude",
        "runner": "build-1",
        "workdir": "",
        "agent_session": "5f1e0c2a-uuid",
    }


def test_once_that_runner_is_offline_another_takes_it(finished, person, other_runner_client):
    follow = run_queue_follow_up(actor=person, previous=finished, prompt="Also b.txt.")
    Runner.objects.filter(name="build-1").update(status=Runner.Status.OFFLINE)

    handed = next_runs(other_runner_client).json()["runs"]

    assert [(r["id"], r["resumes"]["runner"]) for r in handed] == [(follow.pk, "build-1")]


def test_a_lost_continuation_is_queued_again_as_one_resuming_the_same_agent_session(finished, person, runner_client):
    follow = run_queue_follow_up(actor=person, previous=finished, prompt="Also b.txt.")
    take_and_start(runner_client, follow)
    lost = run_transition(actor=SYSTEM, run=follow, to=Run.Status.LOST)

    again = run_requeue_lost(actor=SYSTEM, lost=lost)
    handed = next_runs(runner_client).json()["runs"]

    assert (again.kind, again.resumes_id, again.prompt) == ("continue", follow.pk, "Also b.txt.")
    # The lost run never said which session it worked in: the one it continued, further back.
    assert handed[0]["resumes"]["agent_session"] == "5f1e0c2a-uuid"


def test_a_malformed_agent_session_is_a_400_and_changes_nothing(runner_client, queue_run):
    run = queue_run(provider="claude")
    take_and_start(runner_client, run)

    answer = report(runner_client, run.pk, "running", agent_session="a b; rm -rf /")

    assert answer.status_code == 400 and "agent_session" in answer.json()["errors"]
    assert Run.objects.get(pk=run.pk).status == "starting"
