"""Resume lists the open tool calls of the session's subagents (child sessions) beside its own: a
Claude Code subagent's calls are recorded in a session of its own (the hook, the client's hook/plan.py)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from board.resume import session_resume
from tests.factories import SessionFactory, ToolCallFactory

pytestmark = pytest.mark.django_db


def call(session, client_id: str, *, seconds_ago: int, status: str = "running"):
    started = timezone.now() - timedelta(seconds=seconds_ago)
    finished = None if status == "running" else started + timedelta(seconds=1)
    return ToolCallFactory(
        session=session, client_id=client_id, status=status, started_at=started, finished_at=finished
    )


def test_resume_lists_the_open_calls_of_the_session_its_subagents_and_theirs_only(
    agent_client, session, agent, other_agent, django_assert_num_queries
):
    # given: a child and a grandchild of the session, a sibling session, another agent's session
    child = SessionFactory(agent=agent, id="sess-1:a1", parent=session)
    grandchild = SessionFactory(agent=agent, id="sess-1:a1:b1", parent=child)
    sibling = SessionFactory(agent=agent, id="sess-2")
    call(session, "main-open", seconds_ago=50)
    call(child, "child-open", seconds_ago=40)
    call(grandchild, "grandchild-open", seconds_ago=30)
    call(child, "child-done", seconds_ago=20, status="success")
    call(sibling, "sibling-open", seconds_ago=10)
    call(SessionFactory(agent=other_agent, id="theirs"), "theirs-open", seconds_ago=5)

    # when
    body = agent_client.get(f"/api/v1/sessions/{session.pk}/resume/").json()

    # then: in the order they started, each naming its session
    assert [(c["client_id"], c["session"]) for c in body["open_tool_calls"]] == [
        ("main-open", "sess-1"),
        ("child-open", "sess-1:a1"),
        ("grandchild-open", "sess-1:a1:b1"),
    ]
    child_body = agent_client.get(f"/api/v1/sessions/{child.pk}/resume/").json()
    assert [c["client_id"] for c in child_body["open_tool_calls"]] == ["child-open", "grandchild-open"]
    # One query for the open calls however many subagents: checkpoint, calls, milestones, tasks, worktrees.
    with django_assert_num_queries(5):
        session_resume(session=session)
