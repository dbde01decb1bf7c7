"""The in-process key lookup cache (sessions_app/keys.py): at most 2 s, and never past a change
made in this process (revocation, the admin's pause)."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions_app import keys
from sessions_app.keys import api_key_authenticate, api_key_revoke
from sessions_app.models import Agent, AgentApiKey

pytestmark = pytest.mark.django_db
ME = "/api/v1/agents/me/"


@pytest.fixture(autouse=True)
def cache_on(settings):
    settings.API_KEY_CACHE_SECONDS = 2
    keys.api_key_cache_clear()
    yield
    keys.api_key_cache_clear()


def _key_queries(call) -> int:
    with CaptureQueriesContext(connection) as queries:
        call()
    # the SELECTs of the key; the once-a-minute last_used_at UPDATE is not the lookup
    return sum(
        1
        for q in queries.captured_queries
        if q["sql"].startswith("SELECT") and "sessions_app_agentapikey" in q["sql"].split("WHERE")[0]
    )


def test_a_second_lookup_within_the_window_asks_no_query(agent_client):
    assert _key_queries(lambda: api_key_authenticate(key=agent_client.key)) == 1

    assert _key_queries(lambda: api_key_authenticate(key=agent_client.key)) == 0


def test_each_lookup_gets_its_own_copy(agent_client):
    first = api_key_authenticate(key=agent_client.key)
    first.agent.status = Agent.Status.PAUSED
    first.scopes = ["orchestrate"]

    second = api_key_authenticate(key=agent_client.key)

    assert second.agent.status == Agent.Status.ACTIVE
    assert second.scopes == ["agent"]
    assert second.agent is not first.agent


def test_the_window_is_never_longer_than_2_seconds(agent_client, settings, monkeypatch):
    settings.API_KEY_CACHE_SECONDS = 60
    clock = [1000.0]
    monkeypatch.setattr(keys.time, "monotonic", lambda: clock[0])
    api_key_authenticate(key=agent_client.key)
    clock[0] += 2.01

    assert _key_queries(lambda: api_key_authenticate(key=agent_client.key)) == 1


def test_a_key_revoked_in_this_process_is_refused_at_once(agent_client):
    assert agent_client.get(ME).status_code == 200

    api_key_revoke(api_key=agent_client.api_key)

    response = agent_client.get(ME)
    assert response.status_code == 401
    assert response.json()["message"] == "Invalid or revoked API key."


def test_a_key_revoked_elsewhere_is_refused_once_the_window_ends(agent_client, monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(keys.time, "monotonic", lambda: clock[0])
    assert agent_client.get(ME).status_code == 200
    # another process revokes it: a plain UPDATE, no signal reaches this one
    AgentApiKey.objects.filter(pk=agent_client.api_key.pk).update(revoked_at="2026-01-01T00:00:00Z")

    clock[0] += 2.01

    assert agent_client.get(ME).status_code == 401


def test_pausing_in_the_admin_stops_claims_at_once(agent_client, agent, admin_client):
    from tests.factories import TaskFactory

    TaskFactory()
    TaskFactory()
    assert agent_client.post("/api/v1/tasks/claim-next/").status_code == 200

    response = admin_client.post(
        "/admin/sessions_app/agent/", {"action": "pause_agents", "_selected_action": [agent.pk]}
    )
    assert response.status_code == 302

    response = agent_client.post("/api/v1/tasks/claim-next/")
    assert response.status_code == 409
    assert response.json()["message"] == "Agent 'claude-1' is paused and takes no work."


def test_me_shows_the_agent_as_it_is_now(agent_client, agent):
    assert agent_client.get(ME).json()["display_name"] == agent.display_name
    Agent.objects.filter(pk=agent.pk).update(display_name="changed elsewhere")

    assert agent_client.get(ME).json()["display_name"] == "changed elsewhere"
