"""The task claim's statement is prepared once per PostgreSQL connection (config/speed/prepared.py),
and a claim prepared or not takes the same task and writes the same rows."""

import pytest
from django.db import connection

from board import services
from board.models import Task, TaskClaim
from config import env
from config.actors import Actor
from config.speed.prepared import prepared_statements
from ledger.models import Event
from tests.factories import AgentFactory

postgresql_only = pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's prepared statements")


def _claim_statements() -> list[tuple[str, int, int]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE %s",
            ["WITH picked AS (UPDATE%"],
        )
        return cursor.fetchall()


def _forget_prepared_statements() -> None:
    """DEALLOCATE ALL on this test's session, and psycopg's record of what it prepared there emptied
    too: psycopg notices a DEALLOCATE ALL only the first time that text runs on a connection (its
    check runs when a text enters its cache), and a record naming statements the session no longer
    has fails the next prepared claim ('prepared statement "_pg3_18" does not exist')."""
    connection.ensure_connection()
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")
    connection.connection._prepared.clear()  # no public call empties it


@pytest.fixture
def new_session():
    """No statement prepared yet on this test's connection. The pool hands back the session an
    earlier test on this worker used (a claim through the API, say), statements and all."""
    _forget_prepared_statements()
    assert _claim_statements() == []


def _claim_next(agent) -> Task | None:
    return services.task_claim_next(actor=Actor(agent=agent), agent=agent)


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_claim_next_runs_one_prepared_statement_planned_once_for_the_queue(new_session):
    # given a ready queue and an agent
    Task.objects.bulk_create([Task(title=f"task {i}", status=Task.Status.READY, rank=i) for i in range(12)])
    agent = AgentFactory(slug="claude-1")
    # when it claims ten times on this connection
    claimed = [_claim_next(agent) for _ in range(10)]
    # then it got the ten best tasks in order, through one prepared statement that PostgreSQL
    # stopped planning after its first calls (the status is in the SQL, so the generic plan is the
    # custom one: the ready queue's partial index)
    assert [task.title for task in claimed] == [f"task {i}" for i in range(10)]
    statements = _claim_statements()
    assert len(statements) == 1, statements
    sql, generic, custom = statements[0]
    assert "$1" in sql and "'ready'" in sql
    assert custom + generic == 10 and generic >= 4, (generic, custom)


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_a_prepared_claim_writes_what_an_unprepared_one_writes(django_assert_num_queries):
    # given two queues alike, one claimed prepared, one while Django logs queries (which runs the
    # statement unprepared, with its values in its text)
    agent = AgentFactory(slug="claude-1")
    rows = {}
    for mode in ("prepared", "logged"):
        Task.objects.all().delete()
        Task.objects.bulk_create([Task(title=f"{mode} {i}", status=Task.Status.READY, rank=i) for i in range(3)])
        if mode == "prepared":
            task = _claim_next(agent)
        else:
            with django_assert_num_queries(1):
                task = _claim_next(agent)
        claim = TaskClaim.objects.get(task=task)
        event = Event.objects.get(name="task.claimed", subject_id=str(task.pk))
        rows[mode] = (
            task.title.split()[1],
            task.status,
            task.assignee_id,
            claim.agent_id,
            claim.outcome,
            claim.claimed_at == task.started_at,
            event.actor,
            {key: value for key, value in event.payload.items() if key != "title"},
            event.payload["title"],
        )
    # then both took the best task and wrote the same claim and event
    assert rows["prepared"][0] == "0"
    assert rows["prepared"][1:-1] == rows["logged"][1:-1]
    assert (rows["prepared"][-1], rows["logged"][-1]) == ("prepared 0", "logged 0")


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_with_prepared_statements_off_the_claim_works_unprepared(new_session, monkeypatch):
    # given a connection whose psycopg prepares nothing (DATABASE_PREPARED_STATEMENTS=0)
    Task.objects.bulk_create([Task(title=f"task {i}", status=Task.Status.READY, rank=i) for i in range(3)])
    agent = AgentFactory(slug="claude-1")
    monkeypatch.setattr(connection.connection, "prepare_threshold", None)
    # when it claims
    task = _claim_next(agent)
    # then the claim went through and nothing was prepared
    assert task.title == "task 0" and task.status == Task.Status.IN_PROGRESS
    assert _claim_statements() == []


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_a_claim_prepares_again_on_a_session_emptied_twice(new_session):
    # given a queue, claimed prepared on a session emptied by new_session
    Task.objects.bulk_create([Task(title=f"task {i}", status=Task.Status.READY, rank=i) for i in range(3)])
    agent = AgentFactory(slug="claude-1")
    assert _claim_next(agent).title == "task 0"
    # when the session is emptied again (the next test's new_session on the pooled session)
    _forget_prepared_statements()
    # then the next claim prepares its statement anew instead of naming the one that went
    assert _claim_next(agent).title == "task 1"
    assert len(_claim_statements()) == 1


def test_the_setting_turns_prepared_statements_on_by_default_and_off_when_asked(monkeypatch):
    monkeypatch.setenv("X_DB", "postgres://u@127.0.0.1:5432/app")
    monkeypatch.delenv("DATABASE_PREPARED_STATEMENTS", raising=False)
    assert env.env_database("X_DB", {})["OPTIONS"]["prepare_threshold"] == 5
    monkeypatch.setenv("DATABASE_PREPARED_STATEMENTS", "0")
    assert env.env_database("X_DB", {})["OPTIONS"]["prepare_threshold"] is None


@postgresql_only
@pytest.mark.django_db
def test_the_block_sets_the_preparing_cursor_and_puts_the_old_one_back_even_after_an_error(
    django_assert_num_queries,
):
    connection.ensure_connection()
    before = connection.connection.cursor_factory
    with pytest.raises(ZeroDivisionError), prepared_statements(connection):
        assert connection.connection.cursor_factory is not before
        assert connection.cursor().cursor.__class__ is connection.connection.cursor_factory
        1 / 0  # noqa: B018
    assert connection.connection.cursor_factory is before
    # while Django logs queries, cursors stay the ORM's (client-side binding, the values in the log)
    with django_assert_num_queries(0), prepared_statements(connection):
        assert connection.connection.cursor_factory is before
