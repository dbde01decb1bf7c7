"""The per-run key (SPEC §8): the agent's key for its run's session, minted at start, revoked at the end."""

import pytest

from runners.models import Run
from runners.services import run_cancel
from sessions_app.models import AgentApiKey
from tests.factories import SessionFactory
from tests.runners.runner_clients import client_with_key, report, take_and_start

pytestmark = pytest.mark.django_db


def _event(client, session_id: str):
    return client.post(f"/api/v1/sessions/{session_id}/events/", {"type": "log", "payload": {"m": 1}}, format="json")


@pytest.fixture
def started(runner_client, queue_run):
    run = queue_run()
    body = take_and_start(runner_client, run)
    return Run.objects.get(pk=run.pk), body, client_with_key(body["agent_key"])


def test_the_key_works_on_its_session(started):
    run, body, agent = started

    assert _event(agent, run.session_id).status_code == 201
    assert agent.get("/api/v1/agents/me/").json()["slug"] == "demo-at-build-1"
    milestone = agent.post(f"/api/v1/sessions/{run.session_id}/milestones/", {"text": "half way"}, format="json")
    assert milestone.status_code == 201


def test_the_key_is_refused_on_another_session_of_its_agent(started):
    run, _, agent = started
    other = SessionFactory(agent=run.agent, id="same-agent-other-session")

    assert _event(agent, other.pk).status_code == 403


@pytest.mark.parametrize("end", ["succeeded", "failed", "cancelled"])
def test_the_key_is_refused_once_the_run_ended(runner_client, started, person, end):
    run, _, agent = started
    report(runner_client, run.pk, "running", pid=1)
    if end == "cancelled":
        run_cancel(actor=person, run=run)

    report(runner_client, run.pk, end, exit_code=0 if end == "succeeded" else 1)

    assert _event(agent, run.session_id).status_code == 401
    assert AgentApiKey.objects.filter(session_id=run.session_id, revoked_at__isnull=True).count() == 0


def test_the_runner_key_itself_never_reaches_the_session(runner_client, started):
    run, _, _ = started

    assert _event(runner_client, run.session_id).status_code == 403
