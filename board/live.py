"""Live board pushes (issue 5): every change to a task reaches every open board after commit.

Callers that change tasks outside the services that already push call ``board_push_tasks``
with the ids they touched; it defers the broadcast with ``transaction.on_commit``.
"""

from collections.abc import Iterable


def board_push_tasks(*, task_ids: Iterable[int]) -> None:
    """Queue a push of the given tasks' cards to every open board, after commit."""
    # Filled in by the board's live-update work; until then nothing is pushed.
    return None
