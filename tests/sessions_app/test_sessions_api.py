import re

import pytest

from board.services import task_claim
from config.actors import Actor
from ledger.models import Event
from sessions_app.models import AgentSession, Checkpoint, Milestone, StreamEvent
from tests.factories import SessionFactory, TaskFactory, ToolCallFactory

pytestmark = pytest.mark.django_db


def test_open_generates_an_id_and_records_the_start(agent_client, agent):
    response = agent_client.post("/api/v1/sessions/", {"intent": "Fix login"}, format="json")

    assert response.status_code == 201
    body = response.json()
    assert re.fullmatch(r"session_\d{8}_\d{6}_[0-9a-f]{8}", body["id"])
    assert body["agent"] == "claude-1"
    assert body["status"] == "planning"
    assert Event.objects.filter(name="session.started", subject_id=body["id"]).count() == 1


def test_open_with_a_client_id_twice_returns_the_same_session(agent_client):
    first = agent_client.post("/api/v1/sessions/", {"id": "thread-42", "intent": "x"}, format="json")
    second = agent_client.post("/api/v1/sessions/", {"id": "thread-42", "intent": "x"}, format="json")

    assert (first.status_code, second.status_code) == (201, 200)
    assert AgentSession.objects.filter(pk="thread-42").count() == 1
    assert Event.objects.filter(name="session.started").count() == 1


def test_open_an_id_held_by_another_agent_is_409_and_changes_nothing(agent_client, other_agent):
    SessionFactory(id="taken", agent=other_agent, intent="theirs")

    response = agent_client.post("/api/v1/sessions/", {"id": "taken", "intent": "mine"}, format="json")

    assert response.status_code == 409
    session = AgentSession.objects.get(pk="taken")
    assert (session.agent_id, session.intent) == (other_agent.pk, "theirs")


def test_an_agent_cannot_open_a_session_for_another_agent(agent_client, other_agent):
    response = agent_client.post("/api/v1/sessions/", {"agent": other_agent.slug}, format="json")

    assert response.status_code == 403
    assert AgentSession.objects.count() == 0


def test_staff_opens_a_session_for_a_named_agent(staff_client, agent):
    response = staff_client.post("/api/v1/sessions/", {"agent": agent.slug, "intent": "by hand"}, format="json")
    missing = staff_client.post("/api/v1/sessions/", {"intent": "no agent"}, format="json")

    assert response.status_code == 201
    assert response.json()["agent"] == agent.slug
    assert missing.status_code == 400
    assert AgentSession.objects.count() == 1


@pytest.mark.parametrize("bad_id", ["", "has space", "a/b", "x" * 129, "../etc"])
def test_open_refuses_malformed_ids(agent_client, bad_id):
    response = agent_client.post("/api/v1/sessions/", {"id": bad_id}, format="json")

    assert response.status_code == 400
    assert AgentSession.objects.count() == 0


def test_parent_session_of_another_agent_is_refused(agent_client, other_agent):
    SessionFactory(id="their-orchestrator", agent=other_agent)

    response = agent_client.post("/api/v1/sessions/", {"parent": "their-orchestrator"}, format="json")

    assert response.status_code == 403
    assert AgentSession.objects.filter(agent__slug="claude-1").count() == 0


def test_list_shows_only_my_sessions_and_staff_sees_all(agent_client, staff_client, agent, other_agent):
    SessionFactory.create_batch(2, agent=agent)
    SessionFactory.create_batch(3, agent=other_agent)

    mine = agent_client.get("/api/v1/sessions/").json()
    everything = staff_client.get("/api/v1/sessions/").json()

    assert mine["count"] == 2
    assert {row["agent"] for row in mine["results"]} == {"claude-1"}
    assert everything["count"] == 5


def test_list_filters_by_status(agent_client, agent):
    SessionFactory(agent=agent, status="running")
    SessionFactory(agent=agent, status="completed")

    response = agent_client.get("/api/v1/sessions/?status=completed")

    assert [row["status"] for row in response.json()["results"]] == ["completed"]


def test_list_filters_by_start_time_with_any_offset_python_takes(agent_client, agent):
    # PostgreSQL refuses an offset past ±15:59 in a query; the filter compares in UTC instead
    from datetime import UTC, datetime

    SessionFactory(agent=agent, started_at=datetime(1124, 10, 25, 12, 0, tzinfo=UTC))
    SessionFactory(agent=agent, started_at=datetime(1124, 10, 25, 16, 0, tzinfo=UTC))

    response = agent_client.get("/api/v1/sessions/?started_after=1124-10-24T22:42:19-16:42")

    assert response.status_code == 200
    assert len(response.json()["results"]) == 1  # 1124-10-25T15:24:19Z and later


def test_a_start_time_out_of_range_in_utc_is_a_400_naming_it(agent_client):
    response = agent_client.get("/api/v1/sessions/?started_before=0001-01-01T00:00:00%2B01:00")

    assert response.status_code == 400
    assert "started_before" in response.json()["errors"]


def test_list_query_count_does_not_grow_with_rows(agent_client, agent, django_assert_num_queries):
    SessionFactory.create_batch(2, agent=agent)
    agent_client.get("/api/v1/agents/me/")  # the key's first use writes last_used_at once
    # key lookup, count, page
    with django_assert_num_queries(3):
        agent_client.get("/api/v1/sessions/")
    SessionFactory.create_batch(40, agent=agent)
    with django_assert_num_queries(3):
        response = agent_client.get("/api/v1/sessions/")
    assert response.json()["count"] == 42


def test_read_my_session_another_agents_and_a_missing_one(agent_client, session, other_agent):
    SessionFactory(id="theirs", agent=other_agent)

    assert agent_client.get(f"/api/v1/sessions/{session.pk}/").status_code == 200
    assert agent_client.get("/api/v1/sessions/theirs/").status_code == 403
    assert agent_client.get("/api/v1/sessions/nope/").status_code == 404


class TestTransition:
    def test_legal_moves_record_events(self, agent_client, session):
        url = f"/api/v1/sessions/{session.pk}/transition/"

        waiting = agent_client.post(url, {"status": "waiting_for_input"}, format="json")
        running = agent_client.post(url, {"status": "running"}, format="json")
        done = agent_client.post(url, {"status": "completed", "reason": "all green"}, format="json")

        assert [r.status_code for r in (waiting, running, done)] == [200, 200, 200]
        session.refresh_from_db()
        assert session.status == "completed"
        assert session.ended_at is not None
        changes = list(
            StreamEvent.objects.filter(session=session, type="status_change").values_list("payload", flat=True)
        )
        assert [c["to"] for c in changes] == ["waiting_for_input", "running", "completed"]
        assert Event.objects.filter(name="session.status_changed").count() == 2
        assert Event.objects.filter(name="session.ended").count() == 1

    def test_illegal_move_is_409_listing_the_allowed_ones(self, agent_client, agent):
        session = SessionFactory(agent=agent, status="planning")

        response = agent_client.post(
            f"/api/v1/sessions/{session.pk}/transition/", {"status": "completed"}, format="json"
        )

        assert response.status_code == 409
        assert response.json()["allowed"] == ["running", "failed", "cancelled"]
        assert "running, failed, cancelled" in response.json()["message"]
        session.refresh_from_db()
        assert session.status == "planning"
        assert StreamEvent.objects.count() == 0

    def test_terminal_states_are_final(self, agent_client, agent):
        session = SessionFactory(agent=agent, status="cancelled")
        AgentSession.objects.filter(pk=session.pk).update(ended_at=session.started_at)

        response = agent_client.post(f"/api/v1/sessions/{session.pk}/transition/", {"status": "running"}, format="json")

        assert response.status_code == 409
        assert response.json()["allowed"] == []

    def test_repeating_the_current_status_is_a_no_op(self, agent_client, session):
        response = agent_client.post(f"/api/v1/sessions/{session.pk}/transition/", {"status": "running"}, format="json")

        assert response.status_code == 200
        assert response.json()["changed"] is False
        assert StreamEvent.objects.count() == 0

    def test_unknown_status_is_400(self, agent_client, session):
        response = agent_client.post(f"/api/v1/sessions/{session.pk}/transition/", {"status": "asleep"}, format="json")

        assert response.status_code == 400
        assert "status" in response.json()["errors"]

    def test_another_agent_is_refused_and_nothing_changes(self, other_client, session):
        response = other_client.post(
            f"/api/v1/sessions/{session.pk}/transition/", {"status": "cancelled"}, format="json"
        )

        assert response.status_code == 403
        session.refresh_from_db()
        assert session.status == "running"
        assert Event.objects.count() == 0


def test_session_heartbeat_touches_session_and_agent(agent_client, session, agent):
    response = agent_client.post(f"/api/v1/sessions/{session.pk}/heartbeat/")

    assert response.status_code == 200
    session.refresh_from_db()
    agent.refresh_from_db()
    assert session.last_heartbeat_at is not None
    assert agent.last_heartbeat_at == session.last_heartbeat_at


def test_session_heartbeat_of_another_agent_is_403(other_client, session):
    response = other_client.post(f"/api/v1/sessions/{session.pk}/heartbeat/")

    assert response.status_code == 403
    session.refresh_from_db()
    assert session.last_heartbeat_at is None


class TestResume:
    def test_returns_latest_checkpoint_open_calls_milestones_and_claims(self, agent_client, session, agent):
        Checkpoint.objects.create(session=session, seq=1, state={"step": 1})
        Checkpoint.objects.create(session=session, seq=2, state={"step": 2})
        open_call = ToolCallFactory(session=session, tool_name="Edit")
        ToolCallFactory(session=session, tool_name="Bash", status="success", finished_at=session.started_at)
        Milestone.objects.create(session=session, text="tests written")
        task = TaskFactory()
        task_claim(actor=Actor(agent=agent), agent=agent, task=task, session=session)

        body = agent_client.get(f"/api/v1/sessions/{session.pk}/resume/").json()

        assert body["status"] == "running"
        assert body["checkpoint"]["seq"] == 2
        assert body["checkpoint"]["state"] == {"step": 2}
        assert [c["id"] for c in body["open_tool_calls"]] == [open_call.pk]
        assert [m["text"] for m in body["milestones"]] == ["tests written"]
        assert [t["id"] for t in body["claimed_tasks"]] == [task.pk]

    def test_another_agent_cannot_read_it(self, other_client, session):
        assert other_client.get(f"/api/v1/sessions/{session.pk}/resume/").status_code == 403


@pytest.mark.parametrize(
    ("status", "task_status"), [("cancelled", "ready"), ("failed", "ready"), ("completed", "in_progress")]
)
def test_ending_a_session_gives_back_its_tasks_unless_it_completed(agent_client, session, agent, status, task_status):
    held = TaskFactory()
    other = TaskFactory()
    task_claim(actor=Actor(agent=agent), agent=agent, task=held, session=session)
    task_claim(actor=Actor(agent=agent), agent=agent, task=other)  # claimed outside this session

    agent_client.post(f"/api/v1/sessions/{session.pk}/transition/", {"status": status}, format="json")

    held.refresh_from_db()
    other.refresh_from_db()
    assert held.status == task_status
    assert other.status == "in_progress"
    assert Event.objects.filter(name="task.released").count() == (1 if task_status == "ready" else 0)
