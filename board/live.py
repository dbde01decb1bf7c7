"""Live board pushes (issue 5): every change to a task reaches every open board after commit.

Through the one live-page mechanism (config/live.py), on the topic ``BOARD_GROUP``: a service
names the tasks it changed, and after commit the board's next number is taken and one message
per transaction carries the ids (``{"task_ids": [..]}``). Rendering happens in the hub
(board/consumers.py), once per process and message, from the same partials the page uses, so
nobody connected costs no rendering at all.
"""

import threading
from collections.abc import Iterable
from datetime import datetime, timedelta
from functools import cache

from django.conf import settings
from django.utils import timezone

from board.cards import card_html
from board.selectors import board_cards, board_column_counts
from config.live import live_seq_current, publish_ids

BOARD_GROUP = "board"

# Embedded default only: task id -> when this process last asked to push it (see board_push_tasks).
local_pushes: dict = {}
_local_pushes_lock = threading.Lock()
# An entry only matters until the task-table watch has seen the row's commit, a few seconds (its
# look-back, board/embedded_bridge.py). Older ones are dropped once there are this many: one
# dropped early costs at most a second push of a card as it is.
LOCAL_PUSHES_KEPT = 1000
LOCAL_PUSHES_FOR = timedelta(minutes=1)


def board_seq_current() -> int:
    """The board's last number (0 if none): the page carries it so the client spots what it missed."""
    return live_seq_current(BOARD_GROUP)


def board_push_tasks(*, task_ids: Iterable[int]) -> None:
    """Queue a push of the given tasks' cards to every open board, after commit.

    Calls in one transaction share one message; a rolled-back transaction sends nothing.
    """
    ids = {int(task_id) for task_id in task_ids if task_id is not None}
    if not ids:
        return
    if not settings.REDIS_URL:
        # Embedded default: tell the task-table watch (board/embedded_bridge.py) that this process
        # pushes these rows itself. Noted now, after the row was stamped and before it commits.
        local_pushes_note(ids, noted=timezone.now())
    publish_ids(BOARD_GROUP, ids=ids, field="task_ids")


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
