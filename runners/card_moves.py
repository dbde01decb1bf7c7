"""A card moved on the board, and what that means for the task's run (SPEC §8, issue 13 step 6):
a person dragging a card out of In progress asks the task's active run to stop, in the same
transaction as the move.

Why here and not in board/moves.py: runners depends on board (a run is of a task, it claims and
completes tasks through board.services), so board must not import runners. The board page calls
this function instead of ``task_move``; it composes the two services, with the dependency pointing
down. A hook list in board that runners fills at start would invert the import but hide the call
(a signal by another name); a function-level import of runners in board/moves.py would hide a
cycle. The board page already sits on top of both apps (its "Run with" uses runners), so it is the
one place that knows about the two.
"""

from django.db import transaction

from board.models import Task
from board.moves import MoveResult, task_move
from config.actors import SYSTEM, Actor
from config.api.errors import DomainError
from runners.models import Run
from runners.run_waiting import run_stop


@transaction.atomic
def task_move_stopping_runs(
    *, actor: Actor, task_id: int, status: str, before_id: int | None = None, after_id: int | None = None
) -> MoveResult:
    """``board.moves.task_move``; when the card leaves In progress, its active run (if any) is asked
    to stop too (a queued or waiting one is cancelled at once; a held one gets ``cancel_requested_at``
    and its runner stops the agent). The task stays where the person put it."""
    result = task_move(actor=actor, task_id=task_id, status=status, before_id=before_id, after_id=after_id)
    if result.previous_status == Task.Status.IN_PROGRESS and status != Task.Status.IN_PROGRESS:
        _run_stop(task_id=task_id)
    return result


def _run_stop(*, task_id: int) -> None:
    run = Run.objects.filter(task_id=task_id, status__in=Run.ACTIVE).order_by("-pk").first()
    if run is None:
        return
    try:
        # As Switchyard: anyone allowed on the board may move a card (board groups, not only staff),
        # and the move is the person's decision, recorded as theirs by task_move's task.moved event.
        run_stop(actor=SYSTEM, run=run)
    except DomainError as error:
        if error.code != "conflict":  # ended between our look and its lock: nothing left to stop
            raise
