"""PostgreSQL's claim in one statement (board/services.py, _claim_take): the task's conditional
UPDATE, its open TaskClaim and its task.claimed event, as data-modifying CTEs.

The claim row and the event are the inserts their models generate (ledger/insert_sql.py), not
copies: the rows are those the ORM path (_claim_opened) writes, which
tests/board/test_claim_sql.py checks row by row.
"""

from board.models import TaskClaim
from ledger.events import event_insert_sql
from ledger.insert_sql import InsertSelect

# The open claim of the picked task: every other column as TaskClaim.objects.create leaves it.
CLAIM_INSERT = InsertSelect(TaskClaim, source="picked", exprs={"task": "id"})

# The event task_event("task.claimed", task, actor, agent=..., session=...) records, its
# payload computed from the picked row.
CLAIMED_EVENT_INSERT = event_insert_sql(
    source="picked",
    exprs={
        "subject_id": "id::text",
        "payload": "jsonb_build_object('title', left(title, 200), 'status', status, 'agent', %s::text, "
        "'session', %s::text)",
    },
)


def claim_in_one_statement(db) -> bool:
    """Whether _claim_take writes the claim with claim_take_sql (PostgreSQL) or with the ORM after
    the UPDATE (anywhere); the parity test runs both on PostgreSQL."""
    return db.vendor == "postgresql"


def claim_take_sql(update: str) -> str:
    """``update`` (an UPDATE ... RETURNING * of the task table) with the claim and the event; its
    rows are the task's, with ``claimed_event_id``."""
    return (
        f"WITH picked AS ({update}), claim AS ({CLAIM_INSERT.sql}), event AS ({CLAIMED_EVENT_INSERT.sql}) "
        "SELECT picked.*, (SELECT id FROM event) AS claimed_event_id FROM picked"
    )


def claim_take_params(db, *, agent_id: int, agent_slug: str, session_id: str | None, actor: str, now) -> list:
    """The parameters claim_take_sql adds after the UPDATE's."""
    claim = CLAIM_INSERT.params(db, {"agent": agent_id, "session": session_id, "claimed_at": now})
    event = CLAIMED_EVENT_INSERT.params(
        db,
        {"name": "task.claimed", "subject_type": "task", "actor": actor, "created_at": now},
        expr_params={"payload": [agent_slug, session_id]},
    )
    return claim + event
