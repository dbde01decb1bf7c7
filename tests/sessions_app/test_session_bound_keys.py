"""A per-run key (AgentApiKey.session set, SPEC §8) acts on its session and that session's children
only: every other session of the same agent is 403 with nothing written; it opens only children."""

import pytest
from rest_framework.test import APIClient

from config.actors import SYSTEM
from ledger.models import Event, ToolInvocation
from sessions_app.keys import api_key_create, api_key_revoke
from sessions_app.models import AgentApiKey, AgentSession, Checkpoint, Milestone, StreamEvent
from sessions_app.services import session_open
from workspaces.models import Artifact

pytestmark = pytest.mark.django_db


def _open(agent, session_id, parent=None):
    session, _ = session_open(actor=SYSTEM, agent=agent, session_id=session_id, intent=session_id, parent=parent)
    return session


def _bound_client(agent, session) -> APIClient:
    issued = api_key_create(agent=agent, name="run 1", scopes=[AgentApiKey.Scope.AGENT])
    AgentApiKey.objects.filter(pk=issued.api_key.pk).update(session=session)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.key}")
    client.api_key = issued.api_key
    return client


@pytest.fixture
def run_session(agent):
    return _open(agent, "run-sess")


@pytest.fixture
def elsewhere(agent):
    """Another session of the same agent: the bound key must not reach it."""
    return _open(agent, "other-sess")


@pytest.fixture
def bound(agent, run_session):
    return _bound_client(agent, run_session)


def _writes() -> tuple:
    return (
        StreamEvent.objects.count(),
        ToolInvocation.objects.count(),
        Checkpoint.objects.count(),
        Milestone.objects.count(),
        Artifact.objects.count(),
        AgentSession.objects.count(),
        Event.objects.count(),
    )


def _work(client, session_id) -> list[int]:
    """One request of each kind a running agent makes on a session; their status codes."""
    base = f"/api/v1/sessions/{session_id}"
    return [
        client.get(f"{base}/").status_code,
        client.post(f"{base}/events/", {"type": "log", "payload": {"line": "hi"}}, format="json").status_code,
        client.get(f"{base}/events/").status_code,
        client.post(
            f"{base}/tool-calls/", {"id": "toolu_1", "tool_name": "Bash", "input": {}}, format="json"
        ).status_code,
        client.get(f"{base}/tool-calls/").status_code,
        client.put(
            f"{base}/files/work_products/a.md", data=b"# a", content_type="application/octet-stream"
        ).status_code,
        client.get(f"{base}/files/").status_code,
        client.get(f"{base}/log/").status_code,
        client.get(f"{base}/resume/").status_code,
        client.post(f"{base}/checkpoints/", {"state": {"step": 1}}, format="json").status_code,
        client.get(f"{base}/checkpoints/").status_code,
        client.post(f"{base}/milestones/", {"text": "done a"}, format="json").status_code,
        client.post(f"{base}/heartbeat/", {}, format="json").status_code,
    ]


def test_a_bound_key_works_on_its_session(bound, run_session):
    codes = _work(bound, run_session.pk)

    # the log answers 404 (nothing logged yet) or 200: either way, not refused
    assert [c for c in codes if c >= 400 and c != 404] == [], codes
    assert StreamEvent.objects.filter(session=run_session, type="log").count() == 1
    assert ToolInvocation.objects.filter(session=run_session).count() == 1
    assert Checkpoint.objects.filter(session=run_session).count() == 1
    assert Artifact.objects.filter(workspace=run_session.workspace).count() == 1


def test_a_bound_key_is_refused_on_another_session_of_its_agent_and_nothing_is_written(bound, elsewhere):
    before = _writes()

    codes = _work(bound, elsewhere.pk)
    transition = bound.post(f"/api/v1/sessions/{elsewhere.pk}/transition/", {"status": "completed"}, format="json")

    assert set(codes) == {403}, codes
    assert transition.status_code == 403
    assert "bound to session" in transition.json()["message"]
    assert _writes() == before
    assert AgentSession.objects.get(pk=elsewhere.pk).status == elsewhere.status


def test_the_same_agent_with_an_unbound_key_still_reaches_both(agent_client, run_session, elsewhere):
    assert _work(agent_client, elsewhere.pk)[0] == 200
    assert _work(agent_client, run_session.pk)[0] == 200


def test_object_endpoints_resolving_to_another_session_are_refused(agent, bound, run_session, elsewhere):
    unbound = _bound_client(agent, None)
    unbound.post(
        f"/api/v1/sessions/{elsewhere.pk}/tool-calls/", {"id": "t9", "tool_name": "Bash", "input": {}}, format="json"
    )
    unbound.put(
        f"/api/v1/sessions/{elsewhere.pk}/files/work_products/x.md",
        data=b"x",
        content_type="application/octet-stream",
    )
    call = ToolInvocation.objects.get(session=elsewhere)
    artifact = Artifact.objects.get(workspace=elsewhere.workspace)

    read = bound.get(f"/api/v1/tool-calls/{call.pk}/")
    finish = bound.patch(f"/api/v1/tool-calls/{call.pk}/", {"status": "succeeded"}, format="json")
    export = bound.post(f"/api/v1/artifacts/{artifact.pk}/export/", {"destination": "x.md"}, format="json")

    assert (read.status_code, finish.status_code, export.status_code) == (403, 403, 403)
    call.refresh_from_db()
    assert call.status == ToolInvocation.Status.RUNNING


def test_a_bound_key_lists_only_its_session_and_children(agent, bound, run_session, elsewhere):
    _open(agent, "child-1", parent=run_session)

    listed = bound.get("/api/v1/sessions/").json()["results"]

    assert sorted(s["id"] for s in listed) == ["child-1", "run-sess"]


def test_a_bound_key_opens_a_child_session_and_works_on_it(bound, run_session):
    response = bound.post(
        "/api/v1/sessions/", {"id": "sub-1", "parent": run_session.pk, "intent": "a part"}, format="json"
    )

    assert response.status_code == 201
    assert AgentSession.objects.get(pk="sub-1").parent_id == run_session.pk
    event = bound.post("/api/v1/sessions/sub-1/events/", {"type": "log"}, format="json")
    assert event.status_code == 201


def test_a_bound_key_opens_no_other_session(bound, run_session, elsewhere):
    before = _writes()

    top = bound.post("/api/v1/sessions/", {"id": "free-1", "intent": "x"}, format="json")
    under_other = bound.post("/api/v1/sessions/", {"id": "free-2", "parent": elsewhere.pk}, format="json")
    reopen_other = bound.post("/api/v1/sessions/", {"id": elsewhere.pk}, format="json")

    assert (top.status_code, under_other.status_code, reopen_other.status_code) == (403, 403, 403)
    assert _writes() == before


def test_a_bound_key_reopens_its_own_session(bound, run_session):
    response = bound.post("/api/v1/sessions/", {"id": run_session.pk, "intent": "resume"}, format="json")

    assert response.status_code == 200


def test_a_grandchild_is_out_of_reach(agent, bound, run_session):
    child = _open(agent, "child-1", parent=run_session)
    grandchild = _open(agent, "grandchild-1", parent=child)

    assert bound.get(f"/api/v1/sessions/{child.pk}/").status_code == 200
    assert bound.get(f"/api/v1/sessions/{grandchild.pk}/").status_code == 403
    assert bound.post("/api/v1/sessions/", {"id": "g2", "parent": child.pk}, format="json").status_code == 403


def test_a_bound_key_is_refused_on_task_claims_naming_another_session(bound, elsewhere):
    from tests.factories import TaskFactory

    task = TaskFactory()

    response = bound.post(f"/api/v1/tasks/{task.pk}/claim/", {"session": elsewhere.pk}, format="json")

    assert response.status_code == 403
    task.refresh_from_db()
    assert task.assignee_id is None


def test_a_revoked_bound_key_is_refused(bound, run_session):
    assert bound.get(f"/api/v1/sessions/{run_session.pk}/").status_code == 200

    api_key_revoke(api_key=AgentApiKey.objects.get(pk=bound.api_key.pk))

    response = bound.post(f"/api/v1/sessions/{run_session.pk}/events/", {"type": "log"}, format="json")
    assert response.status_code == 401
    assert StreamEvent.objects.count() == 0
