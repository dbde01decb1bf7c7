"""Moving cards on the board: reorder within a column, or move to another column.

Rules for people (the board is theirs to steer):
- any column to any column, except *into* in_progress: in progress means an agent holds a claim,
  and agents take claims from ready (``task_claim``). A person can't invent a claim, so that move
  is refused with a message (409) instead of leaving an "in progress" card nobody works on;
- moving a claimed in_progress card out of in_progress ends the agent's claim through the same
  code path as the API (done or review: completed; failed: failed; elsewhere: released);
- reordering inside in_progress is fine: it changes only the rank.
"""

from dataclasses import dataclass

from django.db import connection, transaction
from django.utils import timezone

from board.live import board_push_tasks
from board.models import Task, TaskClaim
from board.services import RANK_STEP, end_claim, task_event
from config.actors import SYSTEM, Actor
from config.api.errors import DomainError

TERMINAL = (Task.Status.DONE, Task.Status.FAILED)
CLAIM_ENDINGS = {
    Task.Status.DONE: (TaskClaim.Outcome.COMPLETED, Task.Status.DONE),
    Task.Status.REVIEW: (TaskClaim.Outcome.COMPLETED, Task.Status.REVIEW),
    Task.Status.FAILED: (TaskClaim.Outcome.FAILED, Task.Status.FAILED),
}


MOVES_LOCK_KEY = 0x4D4F5645  # "MOVE": the PostgreSQL advisory lock every board move takes


def _moves_lock() -> None:
    """Serialise board moves for the rest of the transaction.

    Row locks alone are not enough: under READ COMMITTED a card another mover has just put in
    the column is not among the rows this mover's SELECT ... FOR UPDATE waited on, so both would
    take the same midpoint. People move cards at human speed, so one lock for the board costs
    nothing. SQLite's IMMEDIATE transactions already serialise writers at BEGIN.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [MOVES_LOCK_KEY])


@dataclass(frozen=True)
class MoveResult:
    task: Task
    # Every task whose rank changed: the moved one, or its whole column when it was renumbered.
    changed_ids: list[int]
    renumbered: bool
    previous_status: str = ""  # the column it came from (runners/card_moves.py stops a run that left in_progress)


def _rank_between(above: int | None, below: int | None) -> int | None:
    """A rank strictly between the neighbours, or None when there is no integer gap left."""
    if above is None and below is None:
        return RANK_STEP
    if below is None:
        return above + RANK_STEP
    if above is None:
        return below - RANK_STEP
    return (above + below) // 2 if below - above > 1 else None


def _place(column: list[Task], *, before_id: int | None, after_id: int | None) -> int:
    """The index in ``column`` (the moved card left out) where the card goes.

    ``after_id`` is the card that ends up directly above it, ``before_id`` the one directly
    below; with neither, the card goes to the bottom. A neighbour that is no longer in the
    column means the mover's screen is stale: refused, so they see the board as it is first.
    """
    index = {task.pk: i for i, task in enumerate(column)}
    for neighbour, offset in ((after_id, 1), (before_id, 0)):
        if neighbour is None:
            continue
        if neighbour not in index:
            raise DomainError(
                f"Task {neighbour} is no longer in that column; the board was out of date. Try again.",
                code="conflict",
            )
        return index[neighbour] + offset
    return len(column)


def _release_claim(*, actor: Actor, task: Task, status: str) -> Task:
    """End the agent's claim because a person moved the card out of in_progress.

    ``end_claim`` checks that the actor may act for the agent; on the board that permission is
    the page's (people in the board groups steer all work), so it runs as the system and the
    ledger event below names the person.
    """
    if not TaskClaim.objects.filter(task_id=task.pk, released_at__isnull=True).exists():
        return task  # in progress without a claim (a synced task): its state file owns the assignee
    outcome, new_status = CLAIM_ENDINGS.get(status, (TaskClaim.Outcome.RELEASED, Task.Status.READY))
    task, _ = end_claim(actor=SYSTEM, task=task, outcome=outcome, new_status=new_status, error="Moved on the board.")
    task_event("task.released", task, actor, by="board")
    return task


@transaction.atomic
def task_move(
    *, actor: Actor, task_id: int, status: str, before_id: int | None = None, after_id: int | None = None
) -> MoveResult:
    """Put a task in column ``status`` between ``after_id`` (above) and ``before_id`` (below).

    Takes the board's move lock, then locks the task and every card of the target column in pk
    order (against other writers of those rows) before reading ranks: of two people moving at
    once, the second sees the first's result and every screen ends with the same order. Usually
    one row changes (the midpoint rank); when the neighbours have no gap left the column is
    renumbered.
    """
    if status not in Task.Status.values:
        raise DomainError(f"Unknown column {status!r}.")
    if task_id in (before_id, after_id):
        raise DomainError("A card can't be placed next to itself.")
    _moves_lock()
    locked = list(Task.objects.select_for_update().filter(pk=task_id).order_by("pk"))
    if not locked:
        raise DomainError(f"Task {task_id} not found.", code="not_found")
    task = locked[0]
    if status == Task.Status.IN_PROGRESS and task.status != Task.Status.IN_PROGRESS:
        raise DomainError(
            "Only an agent can start a task: move it to Ready and an agent claims it from there.", code="conflict"
        )
    column = list(
        Task.objects.select_for_update().filter(status=status).exclude(pk=task_id).order_by("pk").only("id", "rank")
    )
    column.sort(key=lambda row: (row.rank, row.pk))
    at = _place(column, before_id=before_id, after_id=after_id)
    previous = task.status
    if previous == Task.Status.IN_PROGRESS and status != Task.Status.IN_PROGRESS:
        task = _release_claim(actor=actor, task=task, status=status)
    above = column[at - 1].rank if at > 0 else None
    below = column[at].rank if at < len(column) else None
    rank = _rank_between(above, below)
    renumbered = rank is None
    changed = [task.pk]
    if renumbered:
        column.insert(at, task)
        for position, row in enumerate(column, start=1):
            row.rank = position * RANK_STEP
        Task.objects.bulk_update([row for row in column if row.pk != task.pk], ["rank"])
        changed = [row.pk for row in column]
        rank = task.rank
    _move_save(task, status=status, rank=rank)
    task_event("task.moved", task, actor, **{"from": previous, "to": status, "rank": rank, "by": "board"})
    board_push_tasks(task_ids=changed)
    return MoveResult(task=task, changed_ids=changed, renumbered=renumbered, previous_status=previous)


def _move_save(task: Task, *, status: str, rank: int) -> None:
    fields = ["status", "rank", "updated_at"]
    if status in (Task.Status.BACKLOG, Task.Status.READY) and (task.assignee_id or task.session_id):
        # Open work again (a failed or reviewed card sent back): nobody holds it, so any agent, or a
        # run, may claim it; who worked it before stays in its claims.
        task.assignee = None
        task.session = None
        fields += ["assignee", "session"]
    if status not in TERMINAL and task.finished_at is not None and task.status in TERMINAL:
        # Back from done or failed: it is open work again.
        task.finished_at = None
        fields.append("finished_at")
    task.status = status
    task.rank = rank
    task.updated_at = timezone.now()
    task.save(update_fields=fields)
