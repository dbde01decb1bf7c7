"""POST /api/v1/runners/me/next/: the long poll that hands queued runs to runners."""

import threading
import time

import pytest
from django.db import connection

from config.actors import Actor
from ledger.models import Event
from runners import dispatch
from runners.models import Run, Runner
from runners.services import run_cancel, run_queue, runner_key_create
from sessions_app.models import Agent
from tests.factories import TaskFactory, UserFactory
from tests.runners.runner_clients import client_with_key, next_runs, world_state
from tests.worker import wait_for

pytestmark = pytest.mark.django_db
URL = "/api/v1/runners/me/next/"


def test_a_queued_run_is_handed_out_at_once_as_an_assignment(runner_client, queue_run):
    # given a queued run of a task with a repository and labels
    from workspaces.models import Repository

    repository = Repository.objects.create(name="shop", path="/srv/clones/shop", default_branch="trunk")
    run = queue_run(
        title="Fix the cart", description="It loses items.", labels=["type:bugfix", "urgent"], repository=repository
    )

    # when the runner asks, even willing to wait
    started = time.monotonic()
    response = next_runs(runner_client, wait=10)

    # then it gets it at once, assigned to it under a lease, worked by its demo@build-1 agent
    assert time.monotonic() - started < 2
    assert response.status_code == 200
    assert response.json() == {
        "runs": [
            {
                "id": run.pk,
                "attempt": 1,
                "provider": "demo",
                "prompt": "Fix the cart\n\nIt loses items.",
                "task": {
                    "id": run.task_id,
                    "title": "Fix the cart",
                    "description": "It loses items.",
                    "type": "bugfix",
                    "labels": ["type:bugfix", "urgent"],
                    "repository": {
                        "id": repository.pk,
                        "name": "shop",
                        "path": "/srv/clones/shop",
                        "default_branch": "trunk",
                        "runner": None,  # the server's clone
                    },
                },
                "kind": "work",
                "resumes": None,
                "deferred": None,  # not a waiting run answered
            }
        ],
        "cancel": [],
    }
    stored = Run.objects.select_related("runner", "agent").get(pk=run.pk)
    assert (stored.status, stored.runner.name, stored.agent.slug, stored.agent.display_name) == (
        "assigned",
        "build-1",
        "demo-at-build-1",
        "demo@build-1",
    )
    assert stored.agent.provider == Agent.Provider.CUSTOM
    assert stored.lease_expires_at is not None
    # and the runner counts as seen
    assert Runner.objects.get(pk=runner_client.runner.pk).last_seen_at is not None


def test_the_agent_of_a_known_provider_is_that_provider(runner_client, queue_run):
    queue_run(provider="claude")

    next_runs(runner_client)

    agent = Agent.objects.get(slug="claude-at-build-1")
    assert (agent.display_name, agent.provider) == ("claude@build-1", Agent.Provider.CLAUDE)


def test_nothing_queued_answers_empty_after_the_wait(runner_client):
    started = time.monotonic()

    response = next_runs(runner_client, wait=0.4)

    elapsed = time.monotonic() - started
    assert response.json() == {"runs": [], "cancel": []}
    assert 0.4 <= elapsed < 10  # answered at the end of its wait, not the 25 s default (10 s: a loaded machine)


def test_wait_zero_answers_at_once(runner_client):
    started = time.monotonic()
    assert next_runs(runner_client, wait=0).json() == {"runs": [], "cancel": []}
    assert time.monotonic() - started < 1


def test_the_server_caps_the_wait(runner_client, settings):
    settings.RUNNER_POLL_MAX_SECONDS = 0
    started = time.monotonic()
    assert next_runs(runner_client, wait=30).json()["runs"] == []
    assert time.monotonic() - started < 1


@pytest.mark.django_db(transaction=True)
def test_a_run_queued_while_the_runner_waits_is_handed_out_at_once(runner_client):
    # given a runner waiting up to 20 s, and a person who presses Run half a second later
    task = TaskFactory()
    person = Actor(user=UserFactory(is_staff=True))
    queued: list[Run] = []

    def press_run():
        try:
            time.sleep(0.5)
            queued.append(run_queue(actor=person, task=task, provider="demo"))
        finally:
            connection.close()  # this thread's own connection

    presser = threading.Thread(target=press_run)
    presser.start()
    started = time.monotonic()

    # when it polls
    response = next_runs(runner_client, wait=20)

    # then the answer comes after the queueing, well before the end of the 20 s wait (10 s: a loaded machine)
    elapsed = time.monotonic() - started
    presser.join(timeout=10)
    assert [r["id"] for r in response.json()["runs"]] == [queued[0].pk]
    assert 0.4 < elapsed < 10


@pytest.mark.django_db(transaction=True)
def test_a_cancel_asked_while_the_runner_waits_is_answered_at_once(runner_client, queue_run):
    run = queue_run()
    next_runs(runner_client)
    person = Actor(user=UserFactory(is_staff=True))

    def press_stop():
        try:
            time.sleep(0.5)
            run_cancel(actor=person, run=Run.objects.get(pk=run.pk))
        finally:
            connection.close()

    stopper = threading.Thread(target=press_stop)
    stopper.start()
    started = time.monotonic()
    response = next_runs(runner_client, wait=20)
    stopper.join(timeout=10)

    assert response.json() == {"runs": [], "cancel": [run.pk]}
    assert time.monotonic() - started < 3


def test_capacity_is_respected_oldest_first(runner_client, queue_run):
    # given capacity 2, one run already held, and three queued
    held = queue_run()
    next_runs(runner_client)
    first, second, third = queue_run(), queue_run(), queue_run()

    # when it asks
    handed = [r["id"] for r in next_runs(runner_client).json()["runs"]]

    # then it gets one (2 - 1), the oldest; then nothing until one ends
    assert handed == [first.pk]
    assert next_runs(runner_client).json()["runs"] == []
    assert set(Run.objects.filter(status="queued").values_list("pk", flat=True)) == {second.pk, third.pk}
    assert Run.objects.get(pk=held.pk).status == "assigned"


def test_capacity_fills_in_one_answer(runner_client, queue_run):
    Runner.objects.filter(pk=runner_client.runner.pk).update(capacity=3)
    runs = [queue_run() for _ in range(5)]

    handed = [r["id"] for r in next_runs(runner_client).json()["runs"]]

    assert handed == [run.pk for run in runs[:3]]


def test_providers_and_runner_labels_are_respected(runner_client, queue_run):
    # given runs of a provider it lacks, of a task that needs a gpu runner, and one it can take
    codex = queue_run(provider="codex")
    gpu = queue_run(labels=["runner:gpu"])
    linux = queue_run(labels=["runner:linux", "frontend", "repo:shop"])

    # when the linux runner offering demo and claude asks
    handed = [r["id"] for r in next_runs(runner_client).json()["runs"]]

    # then it gets only the one whose requirements it meets
    assert handed == [linux.pk]
    assert Run.objects.get(pk=codex.pk).status == Run.objects.get(pk=gpu.pk).status == "queued"
    # and once its key gives it gpu (a heartbeat claiming it does not: test_runner_host_namespaces.py), the gpu one
    runner_key_create(name="build-1", labels=["linux", "gpu"])
    assert [r["id"] for r in next_runs(runner_client).json()["runs"]] == [gpu.pk]


def test_a_draining_runner_takes_nothing(runner_client, queue_run):
    run = queue_run()
    runner_client.post("/api/v1/runners/me/heartbeat/", {"draining": True}, format="json")

    assert next_runs(runner_client).json()["runs"] == []
    assert Run.objects.get(pk=run.pk).status == "queued"


def _open_poll(runner_client, *, wait: int, instance: str) -> tuple[threading.Thread, list]:
    """A long poll of the runner process ``instance``, open on the server (in a thread of its own):
    the thread, and the list its answer is appended to."""
    answers = []

    def poll():
        try:
            answers.append(runner_client.post(URL, {"wait": wait, "instance": instance}, format="json"))
        finally:
            connection.close()  # this thread's own connection

    poller = threading.Thread(target=poll)
    poller.start()
    wait_for(lambda: Runner.objects.filter(instance=instance).exists(), message="the poll to be open")
    return poller, answers


@pytest.mark.django_db(transaction=True)
def test_a_poll_of_a_runner_process_since_restarted_hands_out_nothing(runner_client, queue_run):
    """A killed runner's long poll stays open on the server until it answers, into a closed connection:
    once the restarted process (another instance) has spoken, that poll takes no run."""
    poller, answers = _open_poll(runner_client, wait=3, instance="first-process")
    # when the runner restarts (killed; its poll still open) and a run is queued
    runner_client.post("/api/v1/runners/me/heartbeat/", {"instance": "after-restart"}, format="json")
    run = queue_run()
    poller.join(timeout=20)

    # then the old poll answers empty, and the run waits for the runner that is there
    assert answers[0].status_code == 200 and answers[0].json() == {"runs": [], "cancel": []}
    assert Run.objects.get(pk=run.pk).status == "queued"
    fresh = runner_client.post(URL, {"wait": 0, "instance": "after-restart"}, format="json")
    assert [r["id"] for r in fresh.json()["runs"]] == [run.pk]


@pytest.mark.django_db(transaction=True)
def test_a_poll_of_a_runner_declared_gone_ends_and_hands_out_nothing(runner_client, queue_run):
    """A runner killed for good leaves its long poll open on the server: once the lease expiry has
    declared the runner offline, that poll takes no run (not the one its loss re-queued) and ends."""
    from datetime import timedelta

    from django.utils import timezone

    from runners.leases import runs_expire_leases

    poller, answers = _open_poll(runner_client, wait=30, instance="killed")
    # when the runner has not been heard from for a lease, the expiry declares it gone, then a run is queued
    Runner.objects.filter(pk=runner_client.runner.pk).update(last_seen_at=timezone.now() - timedelta(hours=1))
    assert runs_expire_leases().offline == ["build-1"]
    run = queue_run()
    poller.join(timeout=10)

    # then the poll has ended well before its 30 s, empty, and the run waits for a runner that is there
    assert not poller.is_alive()
    assert answers[0].status_code == 200 and answers[0].json() == {"runs": [], "cancel": []}
    assert Run.objects.get(pk=run.pk).status == "queued"


def test_a_resumed_run_says_which_run_and_session_it_resumes(runner_client, queue_run):
    from config.actors import SYSTEM
    from runners.services import run_requeue_lost
    from tests.factories import SessionFactory

    lost = queue_run()
    Run.objects.filter(pk=lost.pk).update(status="lost", ended_at=lost.created_at, session=SessionFactory(id="s-old"))
    lost.refresh_from_db()
    resume = run_requeue_lost(actor=SYSTEM, lost=lost)

    answer = next_runs(runner_client).json()["runs"]

    resumes = {
        "id": lost.pk,
        "session": "s-old",
        "provider": lost.provider,
        "runner": None,
        "workdir": "",
        "agent_session": "",
    }
    assert [(r["id"], r["kind"], r["resumes"]) for r in answer] == [(resume.pk, "work", resumes)]


def test_another_runner_never_gets_a_run_already_handed_out(runner_client, other_runner_client, queue_run):
    run = queue_run()
    next_runs(runner_client)
    before = world_state()

    assert next_runs(other_runner_client).json() == {"runs": [], "cancel": []}
    after = world_state()
    assert after[0] == before[0] and after[2:] == before[2:]  # only build-2's last-seen moved
    assert Run.objects.get(pk=run.pk).runner_id == runner_client.runner.pk


@pytest.mark.parametrize(
    "body", [{"wait": 31}, {"wait": -1}, {"wait": "soon"}, {"wait": 5, "extra": 1}, {"instance": "x" * 65}, []]
)
def test_a_bad_body_is_400_json_and_hands_out_nothing(runner_client, queue_run, body):
    queue_run()
    before = world_state()

    response = runner_client.post(URL, body, format="json")

    assert response.status_code == 400
    assert "message" in response.json()
    assert world_state() == before


def test_only_a_runner_key_may_ask_for_work(agent_client, staff_client, orchestrator_client, queue_run, db):
    queue_run()
    runner, _, _ = runner_key_create(name="build-9")
    from tests.conftest import _client_for

    wrong_scope = _client_for(runner.agent)  # the runner's agent, a key of scope 'agent'
    before = world_state()

    for client in (agent_client, staff_client, orchestrator_client, wrong_scope):
        assert client.post(URL, {"wait": 0}, format="json").status_code == 403
    assert world_state() == before
    assert Event.objects.filter(name="run.assigned").count() == 0
    assert client_with_key("sy_x_y").post(URL, {"wait": 0}, format="json").status_code == 401


@pytest.mark.django_db(transaction=True)
def test_a_runner_deleted_while_its_poll_waits_gets_a_404_not_a_500(runner_client, monkeypatch):
    # given a runner waiting for work, and an engineer who deletes it in the admin meanwhile
    waiting, deleted = threading.Event(), threading.Event()
    wait = dispatch.queue_wait

    def queue_wait(*args, **kwargs):
        waiting.set()
        return wait(*args, **kwargs)

    monkeypatch.setattr(dispatch, "queue_wait", queue_wait)

    def delete_it():
        try:
            if waiting.wait(30):
                Runner.objects.filter(name="build-1").delete()
                deleted.set()
        finally:
            connection.close()  # this thread's own connection

    deleter = threading.Thread(target=delete_it)
    deleter.start()

    # when its poll looks again
    response = next_runs(runner_client, wait=10)
    deleter.join(timeout=30)

    # then it is told the runner is gone
    assert deleted.is_set()
    assert response.status_code == 404, response.content
    assert "was deleted while it waited" in response.json()["message"]
