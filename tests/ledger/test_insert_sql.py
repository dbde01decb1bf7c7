"""The inserts the fast paths embed (ledger/insert_sql.py) against their models and tables.

A fast path's INSERT is generated from its model, so a model change reaches it; these tests
fail if a fragment and its model's concrete columns, or the model and its table, disagree, and
check that a fragment writes the row the ORM writes from the same fields (on both databases:
the bare INSERT ... SELECT is portable; the statements that embed one are checked on PostgreSQL
in tests/board/test_claim_sql.py and tests/workspaces/test_worktree_claims_sql.py).
"""

import pytest
from django.db import connection

from board.claim_sql import CLAIM_INSERT, CLAIMED_EVENT_INSERT
from board.models import TaskClaim
from ledger.events import event_fields, event_insert_sql, event_record
from ledger.insert_sql import InsertSelect
from ledger.models import Event
from tests.factories import TaskFactory
from workspaces.worktrees import claims as worktree_claims

FRAGMENTS = {
    "board claim": (CLAIM_INSERT, TaskClaim),
    "board task.claimed event": (CLAIMED_EVENT_INSERT, Event),
    "worktree one-statement event": (worktree_claims._EVENT_INSERT, Event),
}


def _columns_but_pk(model) -> list[str]:
    return [field.column for field in model._meta.concrete_fields if not field.primary_key]


@pytest.mark.parametrize("name", FRAGMENTS)
def test_a_fragment_inserts_every_concrete_column_of_its_model_once(name):
    fragment, model = FRAGMENTS[name]

    assert fragment.columns == _columns_but_pk(model)
    assert len(fragment.select_list) == len(fragment.columns)
    quote = connection.ops.quote_name
    assert f"INSERT INTO {quote(model._meta.db_table)} ({', '.join(map(quote, fragment.columns))}) SELECT " in (
        fragment.sql
    )


@pytest.mark.django_db
@pytest.mark.parametrize("model", [Event, TaskClaim])
def test_the_table_has_exactly_the_models_columns(model):
    with connection.cursor() as cursor:
        table = connection.introspection.get_table_description(cursor, model._meta.db_table)

    assert sorted(column.name for column in table) == sorted(field.column for field in model._meta.concrete_fields)


def test_a_fragment_refuses_a_field_its_model_lacks():
    with pytest.raises(ValueError, match="no concrete field subject"):
        InsertSelect(Event, exprs={"subject": "id::text"})


def test_params_refuse_a_value_for_a_computed_field_and_an_unknown_field():
    fragment = event_insert_sql(source="picked", exprs={"subject_id": "id::text"})

    with pytest.raises(ValueError, match="computed by the fragment"):
        fragment.params(connection, {"subject_id": "7"})
    with pytest.raises(ValueError, match="no concrete field"):
        fragment.params(connection, {"subjectid": "7"})


def _row(event: Event) -> dict:
    return {field.attname: getattr(event, field.attname) for field in Event._meta.concrete_fields}


@pytest.mark.django_db
@pytest.mark.parametrize(
    "fields",
    [
        {"name": "task.claimed", "subject_type": "task", "subject_id": 7, "actor": "agent:a", "payload": {"x": [1]}},
        {"name": "task.created", "subject_type": "task", "subject_id": "8"},  # actor and payload defaulted
    ],
)
def test_the_event_fragment_writes_the_row_event_record_writes(fields):
    fragment = event_insert_sql()
    with connection.cursor() as cursor:
        cursor.execute(fragment.sql, fragment.params(connection, event_fields(**fields)))
        fast = Event.objects.get(pk=cursor.fetchone()[0])

    general = event_record(**fields)

    assert {k: v for k, v in _row(fast).items() if k not in ("id", "created_at")} == {
        k: v for k, v in _row(general).items() if k not in ("id", "created_at")
    }
    assert fast.created_at is not None


def _claim_row(claim_id: int) -> dict:
    return TaskClaim.objects.filter(pk=claim_id).values("task_id", "agent_id", "session_id", "outcome", "released_at")[
        0
    ]


@pytest.mark.django_db
def test_the_claim_fragment_defaults_what_the_orm_defaults(agent):
    task = TaskFactory()
    fragment = InsertSelect(TaskClaim, exprs={"task": "%s"})
    with connection.cursor() as cursor:
        cursor.execute(fragment.sql, fragment.params(connection, {"agent": agent}, expr_params={"task": [task.pk]}))
    fast = TaskClaim.objects.get()
    fast_row = _claim_row(fast.pk)
    # Closed, so that the task may have another open claim.
    TaskClaim.objects.filter(pk=fast.pk).update(released_at=fast.claimed_at, outcome=TaskClaim.Outcome.RELEASED)

    general = TaskClaim.objects.create(task=task, agent=agent)

    assert fast_row == _claim_row(general.pk)
    assert fast_row["outcome"] == TaskClaim.Outcome.OPEN
    assert fast.claimed_at is not None
