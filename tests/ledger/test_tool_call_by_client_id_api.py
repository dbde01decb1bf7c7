"""Finishing a tool call by the client id it was recorded with (what the Claude Code hook uses)."""

import pytest

from ledger.models import ToolInvocation
from tests.factories import ToolCallFactory

pytestmark = pytest.mark.django_db


def url(session, client_id: str) -> str:
    return f"/api/v1/sessions/{session.pk}/tool-calls/{client_id}/"


def test_finish_by_client_id_once_and_a_retry_is_200(agent_client, session):
    call = ToolCallFactory(session=session, client_id="toolu_01ABC")
    body = {"status": "success", "output": {"stdout": "ok"}}

    finished = agent_client.patch(url(session, "toolu_01ABC"), body, format="json")
    retried = agent_client.patch(url(session, "toolu_01ABC"), body, format="json")
    rewrite = agent_client.patch(url(session, "toolu_01ABC"), {"status": "failure"}, format="json")

    assert (finished.status_code, retried.status_code, rewrite.status_code) == (200, 200, 409)
    assert finished.json()["id"] == call.pk
    call.refresh_from_db()
    assert call.status == "success"
    assert call.output_summary == '{"stdout": "ok"}'


def test_read_by_client_id(agent_client, session):
    call = ToolCallFactory(session=session, client_id="toolu_02")

    response = agent_client.get(url(session, "toolu_02"))

    assert response.status_code == 200
    assert response.json()["id"] == call.pk
    assert response.json()["client_id"] == "toolu_02"


def test_unknown_client_id_is_404_and_another_sessions_id_is_not_found(agent_client, session, agent):
    from tests.factories import SessionFactory

    other_session = SessionFactory(agent=agent, id="sess-2")
    ToolCallFactory(session=other_session, client_id="toolu_elsewhere")

    missing = agent_client.patch(url(session, "nope"), {"status": "success"}, format="json")
    elsewhere = agent_client.patch(url(session, "toolu_elsewhere"), {"status": "success"}, format="json")

    assert (missing.status_code, elsewhere.status_code) == (404, 404)
    assert ToolInvocation.objects.get(client_id="toolu_elsewhere").status == "running"


def test_another_agent_cannot_finish_or_read_by_client_id(other_client, session):
    call = ToolCallFactory(session=session, client_id="toolu_03")

    patch = other_client.patch(url(session, "toolu_03"), {"status": "success"}, format="json")
    read = other_client.get(url(session, "toolu_03"))

    assert (patch.status_code, read.status_code) == (403, 403)
    call.refresh_from_db()
    assert call.status == "running"


def test_bad_finish_body_is_400_and_leaves_it_running(agent_client, session):
    call = ToolCallFactory(session=session, client_id="toolu_04")

    response = agent_client.patch(url(session, "toolu_04"), {"status": "running"}, format="json")

    assert response.status_code == 400
    call.refresh_from_db()
    assert call.status == "running"
