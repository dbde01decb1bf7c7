"""The task endpoints: create, list, read, claim-next, claim, release, complete, fail."""

from collections import Counter

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from board import services
from board.models import Task, TaskClaim
from config.actors import Actor
from config.api.errors import DomainError
from ledger.models import Event
from sessions_app.models import Agent, AgentSession
from tests.board.helpers import assert_json_error, board_state, post_json, task_events
from tests.factories import AgentFactory, CampaignFactory, SessionFactory, TaskFactory

pytestmark = pytest.mark.django_db

TASKS = "/api/v1/tasks/"
CLAIM_NEXT = "/api/v1/tasks/claim-next/"


def _url(task, action: str = "") -> str:
    return f"/api/v1/tasks/{task.pk}/{action + '/' if action else ''}"


# --- create -------------------------------------------------------------------------------


def test_staff_creates_a_ready_task_at_the_bottom_of_its_column(staff_client):
    # given a ready task already on the board
    TaskFactory(status=Task.Status.READY, rank=5000)

    # when staff creates another
    response = post_json(staff_client, TASKS, {"title": "Ship the docs"})

    # then it is ready, P2, ranked one step below the last, and the ledger says so
    assert response.status_code == 201
    body = response.json()
    task = Task.objects.get(pk=body["id"])
    assert body == {
        "id": task.pk,
        "title": "Ship the docs",
        "description": "",
        "status": "ready",
        "priority": "P2",
        "rank": 5000 + 1024,
        "assignee": None,
        "suggested_agent": "",
        "session": None,
        "campaign": None,
        "labels": [],
        "repository": None,
        "source_file": "",
        "external_id": "",
        "started_at": None,
        "finished_at": None,
        "retries": 0,
        "error": "",
        "created_at": body["created_at"],
        "updated_at": body["updated_at"],
    }
    assert task.rank == 6024
    events = list(Event.objects.values("name", "subject_type", "subject_id", "actor", "payload"))
    assert events == [
        {
            "name": "task.created",
            "subject_type": "task",
            "subject_id": str(task.pk),
            "actor": "user:engineer",
            "payload": {"title": "Ship the docs", "status": "ready"},
        }
    ]


def test_an_orchestrating_agent_creates_a_task_with_every_field(orchestrator_client):
    # given a campaign
    campaign = CampaignFactory()

    # when the orchestrator creates a backlog task in it
    response = post_json(
        orchestrator_client,
        TASKS,
        {
            "title": "Draft the blog post",
            "description": "**Markdown** body",
            "status": "backlog",
            "priority": "P0",
            "labels": ["blog", "launch"],
            "campaign": campaign.pk,
            "suggested_agent": "codex-2",
            "external_id": "task-sess-9-writer",
        },
    )

    # then every field is stored as sent
    assert response.status_code == 201
    task = Task.objects.get()
    assert (
        task.title,
        task.description,
        task.status,
        task.priority,
        task.labels,
        task.campaign_id,
        task.suggested_agent,
        task.external_id,
        task.rank,
        task.assignee_id,
    ) == (
        "Draft the blog post",
        "**Markdown** body",
        "backlog",
        "P0",
        ["blog", "launch"],
        campaign.pk,
        "codex-2",
        "task-sess-9-writer",
        1024,
        None,
    )
    assert response.json()["campaign"] == campaign.pk
    assert Event.objects.get().actor == "agent:orchestrator"


def test_a_plain_agent_may_not_create_tasks_and_nothing_is_written(agent_client):
    # given the board as it is
    before = board_state()

    # when an agent without the orchestrate scope creates a task
    response = post_json(agent_client, TASKS, {"title": "Sneaky"})

    # then it is refused and nothing changed
    body = assert_json_error(response, 403)
    assert body["message"] == "Creating tasks needs staff or an agent key with the 'orchestrate' scope."
    assert board_state() == before


def test_creating_without_credentials_is_401_and_nothing_is_written(client, db):
    before = board_state()

    response = post_json(client, TASKS, {"title": "Anonymous"})

    assert_json_error(response, 401)
    assert board_state() == before


def test_creating_in_an_unknown_campaign_is_404_and_nothing_is_written(orchestrator_client):
    before = board_state()

    response = post_json(orchestrator_client, TASKS, {"title": "Orphan", "campaign": 424242})

    body = assert_json_error(response, 404)
    assert body["message"] == "Campaign 424242 not found."
    assert board_state() == before


def test_a_second_task_with_the_same_external_id_is_409_and_nothing_is_written(orchestrator_client):
    # given a task synced with an external id
    assert post_json(orchestrator_client, TASKS, {"title": "One", "external_id": "ext-1"}).status_code == 201
    before = board_state()

    # when another task claims the same external id
    response = post_json(orchestrator_client, TASKS, {"title": "Two", "external_id": "ext-1"})

    # then it is a conflict, not a server error, and nothing was written
    body = assert_json_error(response, 409)
    assert body == {
        "message": "A task with this external_id already exists.",
        "errors": {"external_id": ["Already used by another task."]},
    }
    assert board_state() == before


def test_the_service_names_a_duplicate_source_key_and_writes_nothing(staff_user):
    # given an imported task
    actor = Actor(user=staff_user)
    services.task_create(actor=actor, title="Imported", source_file="p.md", source_key="k" * 64)
    before = board_state()

    # when the same item is created again as a new task
    with pytest.raises(DomainError) as raised:
        services.task_create(actor=actor, title="Imported again", source_file="p.md", source_key="k" * 64)

    # then it is a conflict naming the field, and nothing was written
    assert (raised.value.code, raised.value.message) == ("conflict", "A task with this source_key already exists.")
    assert raised.value.extra == {"errors": {"source_key": ["Already used by another task."]}}
    assert board_state() == before


def test_a_new_task_cannot_start_in_progress(orchestrator_client):
    before = board_state()

    response = post_json(orchestrator_client, TASKS, {"title": "Skip the queue", "status": "in_progress"})

    body = assert_json_error(response, 400)
    assert list(body["errors"]) == ["status"]
    assert board_state() == before


# --- list and read ------------------------------------------------------------------------


def test_the_list_is_paginated_and_ordered_by_priority_then_rank_then_id(agent_client):
    # given tasks out of order
    low = TaskFactory(priority="P3", rank=1)
    high_late = TaskFactory(priority="P0", rank=2048)
    high_early = TaskFactory(priority="P0", rank=1024)
    tie = TaskFactory(priority="P0", rank=1024)

    # when an agent lists them
    response = agent_client.get(TASKS)

    # then the shared queue comes back in claim order
    assert response.status_code == 200
    body = response.json()
    assert (body["count"], body["next"], body["previous"]) == (4, None, None)
    assert [row["id"] for row in body["results"]] == [high_early.pk, tie.pk, high_late.pk, low.pk]


def test_the_list_pages_with_page_size(agent_client):
    tasks = [TaskFactory(rank=(i + 1) * 10) for i in range(5)]

    first = agent_client.get(TASKS, {"page_size": 2}).json()
    last = agent_client.get(TASKS, {"page_size": 2, "page": 3}).json()

    assert first["count"] == 5
    assert [row["id"] for row in first["results"]] == [tasks[0].pk, tasks[1].pk]
    assert first["next"] == "http://testserver/api/v1/tasks/?page=2&page_size=2"
    assert first["previous"] is None
    assert [row["id"] for row in last["results"]] == [tasks[4].pk]
    assert last["next"] is None


def test_the_list_filters(agent_client, agent, session):
    # given tasks spread over statuses, priorities, assignees, campaigns and sessions
    campaign = CampaignFactory()
    ready = TaskFactory(title="Write the launch post", status="ready", priority="P1", campaign=campaign)
    held = TaskFactory(title="Fix login", status="in_progress", priority="P0", assignee=agent, session=session)
    done = TaskFactory(title="Old chore", status="done", priority="P3")

    def ids(**params):
        response = agent_client.get(TASKS, params)
        assert response.status_code == 200, response.content
        return {row["id"] for row in response.json()["results"]}

    # then each filter narrows exactly
    assert ids(status="ready") == {ready.pk}
    assert ids(status=["ready", "done"]) == {ready.pk, done.pk}
    assert ids(priority="P0") == {held.pk}
    assert ids(assignee="claude-1") == {held.pk}
    assert ids(assignee="nobody") == set()
    assert ids(campaign=campaign.pk) == {ready.pk}
    assert ids(session="sess-1") == {held.pk}
    assert ids(q="LAUNCH") == {ready.pk}
    assert ids(status="ready", priority="P0") == set()


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"status": "bogus"}, "status"),
        ({"priority": "P9"}, "priority"),
        ({"campaign": "abc"}, "campaign"),
        ({"campaign": "1.5"}, "campaign"),
        ({"campaign": "99999999999999999999"}, "campaign"),
        ({"q": "a\x00b"}, "q"),
        ({"session": "\x00"}, "session"),
    ],
)
def test_a_bad_filter_is_400_naming_it(agent_client, params, field):
    TaskFactory()

    response = agent_client.get(TASKS, params)

    body = assert_json_error(response, 400)
    assert list(body["errors"]) == [field]


def test_reading_a_task(agent_client, held_task):
    response = agent_client.get(_url(held_task))

    assert response.status_code == 200
    body = response.json()
    assert (body["id"], body["status"], body["assignee"]) == (held_task.pk, "in_progress", "claude-1")


def test_reading_an_unknown_task_is_404(agent_client):
    response = agent_client.get("/api/v1/tasks/987654/")

    body = assert_json_error(response, 404)
    assert body["message"] == "Task 987654 not found."


def test_listing_without_credentials_is_401(client, db):
    assert_json_error(client.get(TASKS), 401)


def _measure(client, url: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200
    return len(queries)


def test_the_task_list_costs_the_same_queries_for_2_and_40_rows(agent_client, agent, django_assert_num_queries):
    # given tasks that use every relation the output shows
    campaign = CampaignFactory()

    def add(count: int) -> None:
        for i in range(count):
            session = SessionFactory(agent=agent)
            TaskFactory(assignee=agent if i % 2 else AgentFactory(), session=session, campaign=campaign)

    add(2)
    # The first request of a key writes its last-used time; later ones within a minute don't.
    agent_client.get(TASKS)
    two_rows = _measure(agent_client, TASKS)

    # when the board grows to 40 rows
    add(38)

    # then the list costs exactly as many queries: key lookup, count, page
    assert two_rows == 3
    with django_assert_num_queries(two_rows):
        response = agent_client.get(TASKS)
    assert response.json()["count"] == 40


# --- claim-next ---------------------------------------------------------------------------


def test_claim_next_takes_priority_then_rank_then_age_and_skips_tasks_suggested_for_others(agent_client, other_client):
    # given ready tasks in a deliberate muddle
    p1_rank_100 = TaskFactory(priority="P1", rank=100)
    p0_rank_5000 = TaskFactory(priority="P0", rank=5000)
    p1_rank_50_old = TaskFactory(priority="P1", rank=50)
    p1_rank_50_new = TaskFactory(priority="P1", rank=50)
    p2_rank_1 = TaskFactory(priority="P2", rank=1)
    p0_for_codex = TaskFactory(priority="P0", rank=1, suggested_agent="codex-2")
    p3_for_me = TaskFactory(priority="P3", rank=1, suggested_agent="claude-1")
    TaskFactory(priority="P0", rank=1, status="backlog")
    TaskFactory(priority="P0", rank=1, status="blocked")

    # when claude-1 claims until nothing is left
    claimed = []
    while (response := agent_client.post(CLAIM_NEXT)).status_code == 200:
        claimed.append(response.json()["id"])

    # then it got them in order, skipping the one suggested for codex-2 and the unready ones
    assert response.status_code == 204
    assert claimed == [
        p0_rank_5000.pk,
        p1_rank_50_old.pk,
        p1_rank_50_new.pk,
        p1_rank_100.pk,
        p2_rank_1.pk,
        p3_for_me.pk,
    ]
    assert Task.objects.get(pk=p0_for_codex.pk).status == "ready"

    # and codex-2 gets the one left for it
    response = other_client.post(CLAIM_NEXT)
    assert response.status_code == 200
    assert response.json()["id"] == p0_for_codex.pk
    assert response.json()["assignee"] == "codex-2"


def test_claim_next_marks_the_task_records_a_claim_and_an_event(agent_client, agent, session):
    # given one ready task
    task = TaskFactory(title="Rotate keys", error="old failure")

    # when the agent claims the next task for its session
    response = post_json(agent_client, CLAIM_NEXT, {"session": "sess-1"})

    # then the task is in progress, held by the agent for that session
    assert response.status_code == 200
    task.refresh_from_db()
    assert (task.status, task.assignee_id, task.session_id, task.error) == ("in_progress", agent.pk, "sess-1", "")
    assert task.started_at is not None
    assert task.started_at == task.updated_at
    body = response.json()
    assert (body["id"], body["status"], body["assignee"], body["session"]) == (
        task.pk,
        "in_progress",
        "claude-1",
        "sess-1",
    )
    claim = TaskClaim.objects.get()
    assert (claim.task_id, claim.agent_id, claim.session_id, claim.outcome, claim.released_at) == (
        task.pk,
        agent.pk,
        "sess-1",
        "open",
        None,
    )
    event = Event.objects.get()
    assert (event.name, event.subject_id, event.actor) == ("task.claimed", str(task.pk), "agent:claude-1")
    assert event.payload == {"title": "Rotate keys", "status": "in_progress", "agent": "claude-1", "session": "sess-1"}


def test_claim_next_on_an_empty_board_is_204_and_writes_nothing(agent_client):
    # given only tasks that are not claimable
    TaskFactory(status="backlog")
    TaskFactory(status="done")
    TaskFactory(status="ready", suggested_agent="codex-2")
    before = board_state()

    # when the agent asks for work
    response = agent_client.post(CLAIM_NEXT)

    # then there is none and nothing changed
    assert response.status_code == 204
    assert response.content == b""
    assert board_state() == before


def test_claim_next_within_a_campaign_takes_only_its_tasks(agent_client):
    campaign = CampaignFactory()
    TaskFactory(priority="P0")
    mine = TaskFactory(priority="P3", campaign=campaign)

    response = post_json(agent_client, CLAIM_NEXT, {"campaign": campaign.pk})
    again = post_json(agent_client, CLAIM_NEXT, {"campaign": campaign.pk})

    assert response.status_code == 200
    assert response.json()["id"] == mine.pk
    assert again.status_code == 204


def test_claim_next_in_an_unknown_campaign_is_404_and_writes_nothing(agent_client):
    TaskFactory()
    before = board_state()

    response = post_json(agent_client, CLAIM_NEXT, {"campaign": 424242})

    assert assert_json_error(response, 404)["message"] == "Campaign 424242 not found."
    assert board_state() == before


def test_claim_next_with_another_agents_session_is_403_and_writes_nothing(agent_client, other_agent):
    # given a ready task and a session that belongs to codex-2
    TaskFactory()
    SessionFactory(agent=other_agent, id="sess-codex")
    before = board_state()

    # when claude-1 tries to claim work for it
    response = post_json(agent_client, CLAIM_NEXT, {"session": "sess-codex"})

    # then it is refused and nothing changed
    assert assert_json_error(response, 403)["message"] == "Session 'sess-codex' belongs to another agent."
    assert board_state() == before


def test_claim_next_with_an_unknown_session_is_404_and_writes_nothing(agent_client):
    TaskFactory()
    before = board_state()

    response = post_json(agent_client, CLAIM_NEXT, {"session": "no-such-session"})

    assert assert_json_error(response, 404)["message"] == "Session 'no-such-session' not found."
    assert board_state() == before


def test_claim_next_for_a_finished_session_is_409_and_writes_nothing(agent_client, session):
    TaskFactory()
    AgentSession.objects.filter(pk=session.pk).update(status=AgentSession.Status.COMPLETED)
    before = board_state()

    response = post_json(agent_client, CLAIM_NEXT, {"session": "sess-1"})

    assert assert_json_error(response, 409)["message"] == "Session 'sess-1' is completed."
    assert board_state() == before


def test_a_paused_agent_takes_no_work(agent_client, agent):
    TaskFactory()
    Agent.objects.filter(pk=agent.pk).update(status=Agent.Status.PAUSED)
    before = board_state()

    response = agent_client.post(CLAIM_NEXT)

    assert assert_json_error(response, 409)["message"] == "Agent 'claude-1' is paused and takes no work."
    assert board_state() == before


def test_a_paused_agent_may_not_claim_a_task_by_id_either(agent_client, agent, ready_task):
    # given a paused agent ("it keeps its key but takes no work")
    Agent.objects.filter(pk=agent.pk).update(status=Agent.Status.PAUSED)
    before = board_state()

    # when it claims a task by id instead of asking for the next one
    response = agent_client.post(_url(ready_task, "claim"))

    # then it is refused the same way
    assert assert_json_error(response, 409)["message"] == "Agent 'claude-1' is paused and takes no work."
    assert board_state() == before


def test_people_do_not_claim_tasks(staff_client):
    TaskFactory()
    before = board_state()

    response = staff_client.post(CLAIM_NEXT)

    assert assert_json_error(response, 403)["message"] == "Only agents claim tasks; people move cards on the board."
    assert board_state() == before


# --- claim --------------------------------------------------------------------------------


def test_claiming_a_ready_task(agent_client, agent, ready_task):
    response = agent_client.post(_url(ready_task, "claim"))

    assert response.status_code == 200
    ready_task.refresh_from_db()
    assert (ready_task.status, ready_task.assignee_id) == ("in_progress", agent.pk)
    assert TaskClaim.objects.filter(task=ready_task, agent=agent, outcome="open").count() == 1
    assert task_events() == Counter({"task.claimed": 1})


def test_claiming_for_my_session_records_it(agent_client, session, ready_task):
    response = post_json(agent_client, _url(ready_task, "claim"), {"session": "sess-1"})

    assert response.status_code == 200
    assert response.json()["session"] == "sess-1"
    assert TaskClaim.objects.get().session_id == "sess-1"


def test_claiming_with_another_agents_session_is_403_and_writes_nothing(agent_client, other_agent, ready_task):
    SessionFactory(agent=other_agent, id="sess-codex")
    before = board_state()

    response = post_json(agent_client, _url(ready_task, "claim"), {"session": "sess-codex"})

    assert_json_error(response, 403)
    assert board_state() == before


def test_reclaiming_a_task_i_hold_is_a_no_op(agent_client, held_task):
    # given claude-1 already holds the task
    before = board_state()

    # when it claims it again (a retry after a lost response, say)
    response = agent_client.post(_url(held_task, "claim"))

    # then it gets the task back and nothing is written twice
    assert response.status_code == 200
    assert (response.json()["id"], response.json()["assignee"]) == (held_task.pk, "claude-1")
    assert board_state() == before


def test_claiming_a_task_someone_else_holds_is_409_and_changes_nothing(other_client, held_task):
    # given claude-1 holds the task
    before = board_state()

    # when codex-2 tries to take it
    response = other_client.post(_url(held_task, "claim"))

    # then it is a conflict naming the holder, and the task is untouched
    body = assert_json_error(response, 409)
    assert body["message"] == f"Task {held_task.pk} is in_progress, held by claude-1; only ready tasks can be claimed."
    assert board_state() == before


@pytest.mark.parametrize("status", ["backlog", "review", "done", "failed", "blocked"])
def test_claiming_a_task_that_is_not_ready_is_409_and_changes_nothing(agent_client, status):
    task = TaskFactory(status=status)
    before = board_state()

    response = agent_client.post(_url(task, "claim"))

    body = assert_json_error(response, 409)
    assert body["message"] == f"Task {task.pk} is {status}; only ready tasks can be claimed."
    assert board_state() == before


def test_claiming_an_unknown_task_is_404(agent_client, db):
    before = board_state()

    response = agent_client.post("/api/v1/tasks/987654/claim/")

    assert assert_json_error(response, 404)["message"] == "Task 987654 not found."
    assert board_state() == before


# --- release ------------------------------------------------------------------------------


def test_the_holder_releases_a_task_back_to_ready_keeping_its_rank(agent_client, held_task):
    # when the holder gives the task back
    response = agent_client.post(_url(held_task, "release"))

    # then it is ready again, unassigned, in the same place, and the claim is closed
    assert response.status_code == 200
    task = Task.objects.get(pk=held_task.pk)
    assert (task.status, task.assignee_id, task.session_id, task.rank, task.retries) == (
        "ready",
        None,
        None,
        held_task.rank,
        0,
    )
    claim = TaskClaim.objects.get()
    assert claim.outcome == "released"
    assert claim.claimed_at <= claim.released_at <= task.updated_at
    assert task_events() == Counter({"task.claimed": 1, "task.released": 1})
    assert Event.objects.filter(name="task.released").get().payload == {
        "title": "Fix the flaky test",
        "status": "ready",
    }


def test_releasing_twice_is_idempotent(agent_client, held_task):
    first = agent_client.post(_url(held_task, "release"))
    after_first = board_state()

    second = agent_client.post(_url(held_task, "release"))

    assert (first.status_code, second.status_code) == (200, 200)
    assert second.json() == first.json()
    assert board_state() == after_first


def test_another_agent_may_not_release_and_nothing_changes(other_client, held_task):
    before = board_state()

    response = other_client.post(_url(held_task, "release"))

    assert assert_json_error(response, 403)["message"] == f"Task {held_task.pk} is claimed by another agent."
    assert board_state() == before


def test_staff_may_release_any_task(staff_client, held_task):
    response = staff_client.post(_url(held_task, "release"))

    assert response.status_code == 200
    assert response.json()["status"] == "ready"
    assert Event.objects.get(name="task.released").actor == "user:engineer"


def test_releasing_a_task_nobody_holds_is_409(agent_client, ready_task):
    before = board_state()

    response = agent_client.post(_url(ready_task, "release"))

    body = assert_json_error(response, 409)
    assert body["message"] == f"Task {ready_task.pk} is ready and not claimed; nothing to release."
    assert board_state() == before


# --- complete -----------------------------------------------------------------------------


def test_the_holder_completes_a_task(agent_client, agent, held_task):
    response = agent_client.post(_url(held_task, "complete"))

    assert response.status_code == 200
    task = Task.objects.get(pk=held_task.pk)
    claim = TaskClaim.objects.get()
    assert (task.status, task.assignee_id, task.finished_at) == ("done", agent.pk, claim.released_at)
    assert claim.outcome == "completed"
    assert task_events() == Counter({"task.claimed": 1, "task.moved": 1})
    assert Event.objects.get(name="task.moved").payload == {
        "title": "Fix the flaky test",
        "status": "done",
        "to": "done",
    }


def test_completing_for_review_moves_the_task_to_review(agent_client, held_task):
    response = post_json(agent_client, _url(held_task, "complete"), {"review": True})

    assert response.status_code == 200
    assert response.json()["status"] == "review"
    assert Event.objects.get(name="task.moved").payload["to"] == "review"


def test_completing_twice_is_idempotent(agent_client, held_task):
    first = agent_client.post(_url(held_task, "complete"))
    after_first = board_state()

    second = agent_client.post(_url(held_task, "complete"))

    assert (first.status_code, second.status_code) == (200, 200)
    assert second.json() == first.json()
    assert board_state() == after_first


def test_completing_done_work_for_review_afterwards_is_409(agent_client, held_task):
    agent_client.post(_url(held_task, "complete"))
    before = board_state()

    response = post_json(agent_client, _url(held_task, "complete"), {"review": True})

    assert_json_error(response, 409)
    assert board_state() == before


def test_another_agent_may_not_complete_and_nothing_changes(other_client, held_task):
    before = board_state()

    response = other_client.post(_url(held_task, "complete"))

    assert assert_json_error(response, 403)["message"] == f"Task {held_task.pk} is claimed by another agent."
    assert board_state() == before


def test_another_agent_repeating_a_completion_it_did_not_make_is_409(agent_client, other_client, held_task):
    agent_client.post(_url(held_task, "complete"))
    before = board_state()

    response = other_client.post(_url(held_task, "complete"))

    assert_json_error(response, 409)
    assert board_state() == before


# --- fail ---------------------------------------------------------------------------------


def test_the_holder_fails_a_task(agent_client, held_task):
    response = post_json(agent_client, _url(held_task, "fail"), {"error": "tests crashed"})

    assert response.status_code == 200
    task = Task.objects.get(pk=held_task.pk)
    claim = TaskClaim.objects.get()
    assert (task.status, task.error, task.retries, task.finished_at) == (
        "failed",
        "tests crashed",
        1,
        claim.released_at,
    )
    assert claim.outcome == "failed"
    assert Event.objects.get(name="task.moved").payload == {
        "title": "Fix the flaky test",
        "status": "failed",
        "to": "failed",
        "error": "tests crashed",
    }


def test_failing_with_retry_puts_it_back_at_the_bottom_of_ready(agent_client, agent, held_task):
    # given another ready task lower in the column
    last = TaskFactory(status="ready", rank=held_task.rank + 50_000)

    # when the holder fails the task asking for a retry
    response = post_json(agent_client, _url(held_task, "fail"), {"error": "rate limited", "retry": True})

    # then it is ready again, unassigned, one retry further, below the last ready task
    assert response.status_code == 200
    task = Task.objects.get(pk=held_task.pk)
    assert (task.status, task.assignee_id, task.session_id, task.retries, task.error, task.rank) == (
        "ready",
        None,
        None,
        1,
        "rate limited",
        last.rank + 1024,
    )

    # and a second round of claim and fail counts a second retry
    assert agent_client.post(_url(task, "claim")).json()["error"] == ""
    post_json(agent_client, _url(task, "fail"), {"error": "rate limited again", "retry": True})
    task.refresh_from_db()
    assert (task.status, task.retries) == ("ready", 2)
    assert TaskClaim.objects.filter(task=task, outcome="failed").count() == 2


def test_failing_twice_is_idempotent_and_counts_one_retry(agent_client, held_task):
    first = post_json(agent_client, _url(held_task, "fail"), {"error": "boom", "retry": True})
    after_first = board_state()

    second = post_json(agent_client, _url(held_task, "fail"), {"error": "boom", "retry": True})

    assert (first.status_code, second.status_code) == (200, 200)
    assert second.json()["retries"] == 1
    assert board_state() == after_first


def test_another_agent_may_not_fail_and_nothing_changes(other_client, held_task):
    before = board_state()

    response = post_json(other_client, _url(held_task, "fail"), {"error": "not mine", "retry": True})

    assert assert_json_error(response, 403)["message"] == f"Task {held_task.pk} is claimed by another agent."
    assert board_state() == before


def test_failing_without_an_error_is_400(agent_client, held_task):
    before = board_state()

    response = post_json(agent_client, _url(held_task, "fail"), {"retry": True})

    body = assert_json_error(response, 400)
    assert list(body["errors"]) == ["error"]
    assert board_state() == before


# --- the ledger over a whole life ---------------------------------------------------------


def test_a_tasks_life_is_in_the_ledger_with_exact_counts(orchestrator_client, agent_client, other_client):
    # given two tasks created through the API
    first = post_json(orchestrator_client, TASKS, {"title": "First", "priority": "P0"}).json()["id"]
    second = post_json(orchestrator_client, TASKS, {"title": "Second"}).json()["id"]

    # when claude-1 claims, releases and re-claims the first, codex-2 claims and fails the second,
    # and claude-1 completes the first; with denied and repeated calls in between
    assert agent_client.post(CLAIM_NEXT).json()["id"] == first
    agent_client.post(f"/api/v1/tasks/{first}/release/")
    agent_client.post(f"/api/v1/tasks/{first}/release/")
    agent_client.post(f"/api/v1/tasks/{first}/claim/")
    agent_client.post(f"/api/v1/tasks/{first}/claim/")
    assert other_client.post(f"/api/v1/tasks/{first}/complete/").status_code == 403
    assert other_client.post(CLAIM_NEXT).json()["id"] == second
    post_json(other_client, f"/api/v1/tasks/{second}/fail/", {"error": "no"})
    agent_client.post(f"/api/v1/tasks/{first}/complete/")
    agent_client.post(f"/api/v1/tasks/{first}/complete/")

    # then the ledger holds each real change exactly once
    assert task_events() == Counter({"task.created": 2, "task.claimed": 3, "task.released": 1, "task.moved": 2})
    assert list(
        Event.objects.filter(subject_id=str(first)).order_by("pk").values_list("name", "actor", "payload__status")
    ) == [
        ("task.created", "agent:orchestrator", "ready"),
        ("task.claimed", "agent:claude-1", "in_progress"),
        ("task.released", "agent:claude-1", "ready"),
        ("task.claimed", "agent:claude-1", "in_progress"),
        ("task.moved", "agent:claude-1", "done"),
    ]
    assert TaskClaim.objects.count() == 3


def test_a_plain_agent_is_refused_before_its_body_is_read(agent_client):
    response = agent_client.post("/api/v1/tasks/", {"title": 42, "campaign": 999}, format="json")
    campaign = agent_client.post("/api/v1/campaigns/", {"nonsense": True}, format="json")

    assert (response.status_code, campaign.status_code) == (403, 403)
    assert Task.objects.count() == 0
