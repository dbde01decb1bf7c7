"""Live board pushes (issue 5): every change to a task reaches every open board after commit.

The writer's side is cheap on purpose, because it runs on the API's hot paths: after commit it
takes the next board-wide sequence number (an in-process counter with the in-memory channel
layer, Redis INCR otherwise: no SQL query) and sends one group message with the changed task
ids. With Redis the INCR and a count of the open boards share one round trip, and the message is
sent only when a board is open (config/side_effects.py): a board that opens later starts from
its "hello" number, and sees a number taken meanwhile as a gap. Rendering happens in the
consumers (board/consumers.py), once per process and message, from the same partials the page
uses, so nobody connected costs no rendering at all.

Group message: ``{"type": "board.tasks_changed", "id": <uuid hex>, "seq": <int>, "task_ids": [..], "at": <epoch s>}``.
"""

import itertools
import threading
import time
import uuid
from collections.abc import Iterable
from datetime import datetime, timedelta
from functools import cache

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from config.side_effects import after_commit, group_members_key, redis_client

BOARD_GROUP = "board"
SEQ_KEY = "switchyard:board:seq"

# Embedded default only: task id -> when this process last asked to push it (see board_push_tasks).
local_pushes: dict = {}
_local_pushes_lock = threading.Lock()
# An entry only matters until the task-table watch has seen the row's commit, a few seconds (its
# look-back, board/embedded_bridge.py). Older ones are dropped once there are this many: one
# dropped early costs at most a second push of a card as it is.
LOCAL_PUSHES_KEPT = 1000
LOCAL_PUSHES_FOR = timedelta(minutes=1)

_local_seq = itertools.count(1)
_local_seq_lock = threading.Lock()
_local_seq_last = 0


def _redis():
    return redis_client(settings.REDIS_URL)


def board_seq_next() -> int:
    """The next board-wide sequence number, shared by every process that shares the channel layer.

    A Redis restart starts the count again at 1; clients treat a number that goes back as a
    gap and refetch the board, so nothing is missed.
    """
    global _local_seq_last
    if settings.REDIS_URL:
        return int(_redis().incr(SEQ_KEY))
    with _local_seq_lock:
        _local_seq_last = next(_local_seq)
        return _local_seq_last


def board_seq_current() -> int:
    """The last number handed out (0 if none): the page carries it so the client spots what it missed."""
    if settings.REDIS_URL:
        return int(_redis().get(SEQ_KEY) or 0)
    return _local_seq_last


class _Batch:
    """The task ids one transaction changed; flushed once, after it commits."""

    def __init__(self) -> None:
        self.ids: set[int] = set()

    def flush(self) -> None:
        if self.ids:
            _send(sorted(self.ids))


def _seq_next_and_joined(layer) -> tuple[int, bool]:
    """The next sequence number, and whether any board is open (True when the layer can't say)."""
    members = group_members_key(layer, BOARD_GROUP)
    if members is None:
        return board_seq_next(), True
    url, key = members
    if url == settings.REDIS_URL:
        pipe = _redis().pipeline(transaction=False)  # one round trip for both
        pipe.incr(SEQ_KEY)
        pipe.zcard(key)
        seq, joined = pipe.execute()
        return int(seq), joined > 0
    return board_seq_next(), redis_client(url).zcard(key) > 0


def _send(task_ids: list[int]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    # The number is taken even when nobody listens: a board whose page was rendered before
    # this change but which joins after it must see a gap at the next message.
    seq, joined = _seq_next_and_joined(layer)
    if not joined:
        return
    # ``at``: when the change was committed and sent (epoch seconds), for latency figures.
    message = {
        "type": "board.tasks_changed",
        "id": uuid.uuid4().hex,
        "seq": seq,
        "task_ids": task_ids,
        "at": time.time(),
    }
    async_to_sync(layer.group_send)(BOARD_GROUP, message)


def board_push_tasks(*, task_ids: Iterable[int]) -> None:
    """Queue a push of the given tasks' cards to every open board, after commit.

    Calls in one transaction share one message. A rolled-back transaction drops its callback,
    so nothing is sent for it; a rolled-back savepoint may leave its ids in the batch, which
    only re-sends cards as they are.
    """
    ids = {int(task_id) for task_id in task_ids if task_id is not None}
    if not ids:
        return
    if not settings.REDIS_URL:
        # Embedded default: tell the task-table watch (board/embedded_bridge.py) that this process
        # pushes these rows itself. Noted now, after the row was stamped and before it commits.
        local_pushes_note(ids, noted=timezone.now())
    connection = transaction.get_connection()
    if not connection.in_atomic_block:
        _send(sorted(ids))  # autocommit: the change is already committed
        return
    batch = getattr(connection, "_board_push_batch", None)
    # The batch belongs to this transaction only while its callback is still queued on it.
    if batch is None or not any(func == batch.flush for _, func, _ in connection.run_on_commit):
        batch = _Batch()
        connection._board_push_batch = batch
        after_commit(batch.flush)
    batch.ids |= ids


# Events about something else than a task that its card shows: a run's badge (runners/).
CARD_EVENT_SUBJECTS = frozenset({"run"})


def board_push_for_event(*, subject_type: str, payload: dict) -> None:
    """A card shows more than its task's row: an event about a run pushes its task's card (the
    payload names the task), the way the task services push their own changes."""
    if subject_type in CARD_EVENT_SUBJECTS and payload.get("task") is not None:
        board_push_tasks(task_ids=[payload["task"]])


def local_pushes_note(ids: Iterable[int], *, noted: datetime) -> None:
    """Note that this process pushes these tasks itself, dropping notes older than LOCAL_PUSHES_FOR
    when there are more than LOCAL_PUSHES_KEPT (else one entry per task ever pushed stays)."""
    with _local_pushes_lock:
        for task_id in ids:
            local_pushes[task_id] = noted
        if len(local_pushes) > LOCAL_PUSHES_KEPT:
            oldest = noted - LOCAL_PUSHES_FOR
            for task_id in [task_id for task_id, when in local_pushes.items() if when < oldest]:
                del local_pushes[task_id]


def board_cards_render(*, task_ids: list[int]) -> dict:
    """The changed cards and every column count as out-of-band HTML, from the page's partials.

    Returns ``{"html": ..., "removed": [ids of tasks that no longer exist]}``: three queries
    however many cards (cards, counts; the template loader caches after the first).
    """
    from django.template.loader import render_to_string

    from board.board_selectors import board_cards, board_column_counts
    from board.cards import card_html

    cards = board_cards(task_ids=task_ids)
    found = {task.pk for task in cards}
    counts = board_column_counts()
    prefix = task_url_prefix()
    parts = [card_html(task, task_url_prefix=prefix, oob=True) for task in cards]
    parts += [
        render_to_string("board/_column_count.html", {"status": status, "count": count, "oob": True})
        for status, count in counts.items()
    ]
    return {"html": "".join(parts), "removed": [task_id for task_id in task_ids if task_id not in found]}


@cache
def task_url_prefix() -> str:
    """'/tasks/': the detail URL without its id, reversed once rather than once per card."""
    from django.urls import reverse

    return reverse("board:task", args=[1])[: -len("1/")]
