"""Board pushes for changes made in other processes, on the embedded default.

With Redis, every process shares the channel layer, so a task changed by the Celery worker
(sync-to-db), a management command (imports) or another web process reaches every board. The
embedded default's in-memory layer lives inside one process: changes made elsewhere would never
be pushed. There, the web process watches the task table instead: while at least one board is
open, it looks every ``POLL_SECONDS`` for rows whose ``updated_at`` moved and pushes them like
any other change (``task_table_watch``, run by the board's hub while a board is open,
board/consumers.py). Changes this process pushes itself go through the in-memory layer
(config/live.py) and are skipped here: ``board_push_tasks`` notes each row it is asked to push,
after the row was stamped and before it commits. So the poll only carries what the writer in
another process (the worker, a command) changed; session pages have no such bridge.
"""

import asyncio
from datetime import timedelta

from channels.db import database_sync_to_async
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.utils import timezone

from board.live import board_push_tasks, local_pushes
from board.models import Task

POLL_SECONDS = 0.5
# A writer stamps updated_at before it commits: look back this far so a slow commit is not missed.
OVERLAP = timedelta(seconds=5)


def bridge_needed() -> bool:
    return isinstance(get_channel_layer(), InMemoryChannelLayer)


class TaskTableWatch:
    """What has been seen: ``(task id, updated_at)`` pairs within the look-back window."""

    def __init__(self) -> None:
        self.since = timezone.now()
        self.seen: dict[int, object] = {}

    def changed_ids(self) -> list[int]:
        rows = Task.objects.filter(updated_at__gt=self.since - OVERLAP).values_list("id", "updated_at")
        # A row stamped before this process noted it for a push is pushed by this process
        # (stamp, note, commit, push): only later stamps are someone else's.
        fresh = [
            task_id
            for task_id, stamp in rows
            if self.seen.get(task_id) != stamp and local_pushes.get(task_id, stamp) <= stamp
        ]
        self.seen = dict(rows)
        if rows:
            self.since = max(stamp for _, stamp in rows)
        return fresh


def _poll_once(watch: TaskTableWatch) -> None:
    changed = watch.changed_ids()
    if changed:
        board_push_tasks(task_ids=changed)


_poll = database_sync_to_async(_poll_once)


async def task_table_watch() -> None:
    """Push what other processes change, until cancelled (the board hub runs it while boards are open)."""
    watch = TaskTableWatch()
    while True:
        await asyncio.sleep(POLL_SECONDS)
        await _poll(watch)
