import pytest

from sessions_app.models import Agent

pytestmark = pytest.mark.django_db


def test_me_returns_the_agent_behind_the_key(agent_client):
    response = agent_client.get("/api/v1/agents/me/")

    assert response.status_code == 200
    assert response.json()["slug"] == "claude-1"


def test_heartbeat_records_the_time_and_revives_a_stale_agent(agent_client, agent):
    Agent.objects.filter(pk=agent.pk).update(status=Agent.Status.ERROR)

    response = agent_client.post("/api/v1/agents/me/heartbeat/")

    assert response.status_code == 200
    agent.refresh_from_db()
    assert agent.last_heartbeat_at is not None
    assert agent.status == Agent.Status.ACTIVE
    assert response.json()["status"] == "active"


def test_no_key_is_401(client, db):
    response = client.get("/api/v1/agents/me/")

    assert response.status_code == 401
    assert "message" in response.json()


def test_a_wrong_key_is_401(client, agent_client):
    response = client.get("/api/v1/agents/me/", HTTP_AUTHORIZATION="Bearer sy_00000000_not-a-real-key")

    assert response.status_code == 401
    assert response.json()["message"] == "Invalid or revoked API key."
