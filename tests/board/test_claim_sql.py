"""The claim in one statement (board/claim_sql.py) writes what the general path writes.

The same claim, by the same agent and session, of two tasks alike in every column but their ids,
once through PostgreSQL's single statement and once through the ORM path that SQLite takes
(forced on PostgreSQL): the task rows, the claim rows and the events must agree in every column
but ids and timestamps. PostgreSQL only: the single statement does not exist on SQLite, where the
general path is the only one (tests/ledger/test_insert_sql.py checks the fragments there too).
"""

import pytest
from django.db import connection

from board import services
from board.models import Task, TaskClaim
from config.actors import Actor
from config.api.errors import DomainError
from ledger.models import Event
from runners.services import run_queue
from tests.factories import SessionFactory, TaskFactory, UserFactory

pytestmark = [
    pytest.mark.django_db(transaction=True),  # task_claim_next runs its statement in autocommit
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the single claim statement is PostgreSQL's"),
]

TIMESTAMPS = {"created_at", "updated_at", "started_at", "claimed_at"}


def _rows(task_id: int) -> dict:
    """What a claim of this task wrote, but ids and timestamps."""
    task = Task.objects.filter(pk=task_id).values()[0]
    claims = list(TaskClaim.objects.filter(task_id=task_id).values())
    events = list(Event.objects.filter(subject_type="task", subject_id=str(task_id), name="task.claimed").values())
    assert len(claims) == 1 and len(events) == 1
    return {
        "task": {k: v for k, v in task.items() if k not in TIMESTAMPS | {"id"}},
        "claim": {k: v for k, v in claims[0].items() if k not in TIMESTAMPS | {"id", "task_id"}},
        "event": {k: v for k, v in events[0].items() if k not in TIMESTAMPS | {"id", "subject_id"}},
    }


def _twins() -> tuple[Task, Task]:
    """Two ready tasks alike but for their ids (the same rank too: the pick orders by id last)."""
    first = TaskFactory(title="Port the exporter " + "é" * 250, labels=["io"], priority=Task.Priority.P1)
    second = TaskFactory(title=first.title, labels=["io"], priority=Task.Priority.P1)
    Task.objects.filter(pk__in=[first.pk, second.pk]).update(rank=first.rank)
    return first, second


def _general_path(monkeypatch) -> None:
    monkeypatch.setattr(services, "claim_in_one_statement", lambda db: False)


@pytest.mark.parametrize("with_session", [True, False])
def test_claiming_a_task_writes_the_same_rows_on_both_paths(agent, monkeypatch, with_session):
    session = SessionFactory(agent=agent) if with_session else None
    actor = Actor(agent=agent)
    fast_task, general_task = _twins()

    services.task_claim(actor=actor, agent=agent, task=fast_task, session=session)
    _general_path(monkeypatch)
    services.task_claim(actor=actor, agent=agent, task=general_task, session=session)

    fast, general = _rows(fast_task.pk), _rows(general_task.pk)
    assert fast == general
    assert fast["event"]["payload"] == {
        "title": fast_task.title[:200],
        "status": Task.Status.IN_PROGRESS,
        "agent": agent.slug,
        "session": session.pk if session else None,
    }


@pytest.mark.parametrize("with_session", [True, False])
def test_claiming_the_next_task_writes_the_same_rows_on_both_paths(agent, monkeypatch, with_session):
    session = SessionFactory(agent=agent) if with_session else None
    actor = Actor(agent=agent)
    first, second = _twins()

    fast_task = services.task_claim_next(actor=actor, agent=agent, session=session)
    _general_path(monkeypatch)
    general_task = services.task_claim_next(actor=actor, agent=agent, session=session)

    assert [fast_task.pk, general_task.pk] == [first.pk, second.pk]
    assert _rows(first.pk) == _rows(second.pk)


def test_the_one_statement_stamps_the_task_claim_and_event_with_one_time(agent):
    task, _ = _twins()

    services.task_claim(actor=Actor(agent=agent), agent=agent, task=task)

    task.refresh_from_db()
    claim = TaskClaim.objects.get(task=task)
    event = Event.objects.get(subject_type="task", subject_id=str(task.pk), name="task.claimed")
    assert task.started_at == task.updated_at == claim.claimed_at == event.created_at


def test_both_paths_leave_a_task_with_an_active_run_to_its_run(agent, monkeypatch):
    """The claim conditions (runners/task_claims.py) are part of both paths' statements alike."""
    actor = Actor(agent=agent)
    first, second = _twins()
    kept = TaskFactory(title="Has a run", priority=Task.Priority.P0)  # the best task on the board
    run = run_queue(actor=Actor(user=UserFactory(is_staff=True)), task=kept, provider="demo")

    fast_task = services.task_claim_next(actor=actor, agent=agent)
    with pytest.raises(DomainError, match=f"run {run.pk} \\(queued\\)"):
        services.task_claim(actor=actor, agent=agent, task=kept)
    _general_path(monkeypatch)
    general_task = services.task_claim_next(actor=actor, agent=agent)
    with pytest.raises(DomainError, match=f"run {run.pk} \\(queued\\)"):
        services.task_claim(actor=actor, agent=agent, task=kept)

    assert [fast_task.pk, general_task.pk] == [first.pk, second.pk]
    assert _rows(first.pk) == _rows(second.pk)
    kept.refresh_from_db()
    assert (kept.status, kept.assignee_id, TaskClaim.objects.filter(task=kept).exists()) == ("ready", None, False)
    assert services.task_claim_next(actor=actor, agent=agent) is None  # nothing left but the run's
