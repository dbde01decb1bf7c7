"""POST /api/v1/runners/me/heartbeat/: what the runner reports replaces what is stored, its leases are
renewed, and it hears what it holds, what to cancel and what to drop."""

from datetime import timedelta

import pytest
from django.utils import timezone

from config.actors import SYSTEM
from runners.models import Run, Runner
from runners.services import run_cancel, run_transition
from tests.runners.runner_clients import client_with_key, take_and_start, world_state

pytestmark = pytest.mark.django_db
URL = "/api/v1/runners/me/heartbeat/"


def test_a_heartbeat_replaces_what_the_runner_reports_and_puts_it_online(runner_client):
    # given an offline runner
    Runner.objects.filter(pk=runner_client.runner.pk).update(status=Runner.Status.OFFLINE)
    body = {"host": "build-1.lan", "labels": ["linux", "gpu"], "providers": ["demo", "shell"], "capacity": 4}

    # when it heartbeats
    response = runner_client.post(URL, {**body, "version": "0.2.0"}, format="json")

    # then what it sent is stored (but the labels: its key's stay, tests/runners/test_runner_host_namespaces.py),
    # it is online and seen now, and it hears the lease terms
    assert response.status_code == 200
    stored = Runner.objects.get(pk=runner_client.runner.pk)
    assert (stored.host, stored.labels, stored.providers, stored.capacity, stored.version, stored.status) == (
        "build-1.lan",
        ["linux"],
        ["demo", "shell"],
        4,
        "0.2.0",
        "online",
    )
    assert timezone.now() - stored.last_seen_at < timedelta(seconds=5)
    answer = response.json()
    assert (answer["lease_seconds"], answer["heartbeat_seconds"]) == (60, 10)
    assert answer["runner"]["name"] == "build-1"
    assert (answer["held"], answer["cancel"], answer["dropped"]) == ([], [], [])


def test_fields_not_sent_are_kept_and_draining_is_reported(runner_client):
    runner_client.post(URL, {"draining": True}, format="json")

    stored = Runner.objects.get(pk=runner_client.runner.pk)
    assert (stored.status, stored.providers, stored.labels, stored.capacity) == (
        "draining",
        ["demo", "claude"],
        ["linux"],
        2,
    )
    # and it stays draining until it says otherwise
    runner_client.post(URL, {}, format="json")
    assert Runner.objects.get(pk=runner_client.runner.pk).status == "draining"
    runner_client.post(URL, {"draining": False}, format="json")
    assert Runner.objects.get(pk=runner_client.runner.pk).status == "online"


def test_held_runs_are_listed_their_leases_renewed_cancels_and_drops_said(runner_client, queue_run, person):
    # given a started run, an assigned one with a cancel pending, and one that already ended
    started = queue_run()
    take_and_start(runner_client, started)
    asked = queue_run()
    runner_client.post("/api/v1/runners/me/next/", {"wait": 0}, format="json")
    run_cancel(actor=person, run=asked)
    Run.objects.filter(runner=runner_client.runner).update(lease_expires_at=timezone.now() + timedelta(seconds=3))
    ended = Run.objects.get(pk=asked.pk)

    # when the runner heartbeats, naming what it believes it holds (one at a stale attempt, one unknown)
    response = runner_client.post(
        URL,
        {
            "runs": [
                {"id": started.pk, "attempt": 1, "pid": 4242, "alive": True},
                {"id": asked.pk, "attempt": 7},
                {"id": 999999, "attempt": 1},
            ]
        },
        format="json",
    )

    # then it hears both held runs, the one to cancel, and what to drop
    answer = response.json()
    started_session = Run.objects.get(pk=started.pk).session_id
    assert answer["held"] == [
        {
            "id": started.pk,
            "attempt": 1,
            "status": "starting",
            "cancel": False,
            "session": started_session,
            "provider": "demo",
        },
        {"id": ended.pk, "attempt": 1, "status": "assigned", "cancel": True, "session": None, "provider": "demo"},
    ]
    assert (answer["cancel"], answer["dropped"]) == ([asked.pk], sorted([asked.pk, 999999]))
    # and the started run's lease runs RUNNER_LEASE_SECONDS from now; the assigned one keeps the short
    # lease it was handed out with (RUNNER_ASSIGN_ACK_SECONDS), heartbeats or not
    started_lease = Run.objects.get(pk=started.pk).lease_expires_at
    assert started_lease - timezone.now() > timedelta(seconds=55)
    assert Run.objects.get(pk=ended.pk).lease_expires_at - timezone.now() <= timedelta(seconds=15)


def test_a_run_handed_back_is_dropped(runner_client, queue_run):
    run = queue_run()
    runner_client.post("/api/v1/runners/me/next/", {"wait": 0}, format="json")
    run_transition(actor=SYSTEM, run=run, to=Run.Status.QUEUED)  # its lease lapsed

    answer = runner_client.post(URL, {"runs": [{"id": run.pk, "attempt": 1}]}, format="json").json()

    assert (answer["held"], answer["dropped"]) == ([], [run.pk])


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"capacity": 0}, "capacity"),
        ({"capacity": "two"}, "capacity"),
        ({"providers": ["claude code"]}, "providers"),
        ({"labels": "linux"}, "labels"),
        ({"runs": [{"id": 1}]}, "runs"),
        ({"draining": "maybe"}, "draining"),
        ({"colour": "blue"}, "colour"),
    ],
)
def test_a_bad_body_is_400_json_and_changes_nothing(runner_client, body, field):
    before = world_state()

    response = runner_client.post(URL, body, format="json")

    assert response.status_code == 400
    assert field in response.json()["errors"]
    assert world_state() == before


def test_only_a_runner_key_may_heartbeat(
    agent_client, orchestrator_client, staff_client, runner_client, make_agent_client
):
    from sessions_app.models import AgentApiKey
    from tests.factories import AgentFactory

    # a key of scope 'run' whose agent is no runner's
    stray = make_agent_client(AgentFactory(slug="not-a-runner"), scopes=[AgentApiKey.Scope.RUN])
    # the runner's own agent with a key of scope 'agent'
    wrong_scope = make_agent_client(runner_client.runner.agent)
    before = world_state()

    for client in (agent_client, orchestrator_client, staff_client, stray, wrong_scope):
        response = client.post(URL, {"host": "evil"}, format="json")
        assert response.status_code == 403, client
        assert "message" in response.json()
    assert world_state() == before
    assert client_with_key("sy_nope_nope").post(URL, {}, format="json").status_code == 401


def test_a_heartbeat_keeps_the_agents_of_started_runs_alive_for_the_reaper(runner_client, queue_run, settings):
    from composition.reaper import agents_reap_stale
    from sessions_app.models import Agent
    from tests.runners.runner_clients import take_and_start

    # given a started run whose agent has been quiet for longer than the reaper allows
    run = queue_run()
    take_and_start(runner_client, run)
    agent = Run.objects.get(pk=run.pk).agent
    Agent.objects.filter(pk=agent.pk).update(last_heartbeat_at=timezone.now() - timedelta(hours=1))

    # when its runner heartbeats, then the reaper runs
    runner_client.post(URL, {}, format="json")
    reaped = agents_reap_stale()

    # then the agent counts as alive and keeps its task
    assert reaped == []
    assert Agent.objects.get(pk=agent.pk).status == "active"
    assert Run.objects.get(pk=run.pk).task.status == "in_progress"
