"""Card HTML, rendered by templates/board/_card.html and kept per process by what the card shows.

Django's template engine spends about 0.1-0.2 ms on a card; a 2,000-card board re-rendered on
every refetch would blow the page's 300 ms budget. A card's HTML depends only on the values in
its key below (the age is in it, as the short text it shows), so a stored rendering is reused
exactly while nothing on the card changed: no invalidation to forget. Per process, bounded.
"""

import threading
from dataclasses import dataclass, field

from django.db.models import QuerySet
from django.template.loader import render_to_string

from board.card_extras import card_extra_values, card_extras
from board.models import Task
from board.templatetags.board_tags import age

CARDS_KEPT = 20_000
_cards: dict[tuple, str] = {}
_lock = threading.Lock()


def _key(task: Task, prefix: str, oob: bool) -> tuple:
    assignee, campaign = task.assignee, task.campaign
    return (
        task.pk,
        task.title,
        task.status,
        task.priority,
        task.rank,
        tuple(task.labels or ()),
        age(task.created_at),
        task.updated_at,
        (assignee.slug, assignee.display_name, assignee.emoji) if assignee is not None else None,
        campaign.name if campaign is not None else None,
        task.session.status if task.session_id is not None and task.session is not None else None,
        card_extra_values(task),
        prefix,
        oob,
    )


def card_html(task: Task, *, task_url_prefix: str, oob: bool = False) -> str:
    key = _key(task, task_url_prefix, oob)
    html = _cards.get(key)
    if html is None:
        html = render_to_string(
            "board/_card.html",
            {"task": task, "oob": oob, "task_url_prefix": task_url_prefix, "card_extras": card_extras()},
        )
        with _lock:
            if len(_cards) >= CARDS_KEPT:
                _cards.pop(next(iter(_cards)))  # the oldest entry: dicts keep insertion order
            _cards[key] = html
    return html


COLUMNS = list(Task.Status)


@dataclass
class Column:
    status: str
    label: str
    tasks: list[Task] = field(default_factory=list)
    cards: list[str] = field(default_factory=list)  # each task's card HTML, in order

    @property
    def count(self) -> int:
        return len(self.tasks)


def board_columns(*, tasks: QuerySet[Task], task_url_prefix: str) -> list[Column]:
    """The seven columns, each with its cards in rank order and their HTML: one query."""
    columns = {status.value: Column(status=status.value, label=status.label) for status in COLUMNS}
    for task in tasks:
        column = columns[task.status]
        column.tasks.append(task)
        column.cards.append(card_html(task, task_url_prefix=task_url_prefix))
    return list(columns.values())


def board_labels(*, columns: list[Column]) -> list[str]:
    """Labels on the cards shown, for the label filter's suggestions (no query)."""
    return sorted({label for column in columns for task in column.tasks for label in task.labels or []})
