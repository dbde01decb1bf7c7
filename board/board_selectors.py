"""Reads for the kanban board page, its pushes and the task detail panel.

The page and the pushes render cards from the same queryset, so a card looks the same however
it reached the screen, and the page costs the same number of queries for 3 cards or 3,000.
"""

from dataclasses import dataclass, field

from django.db.models import Count, OuterRef, QuerySet, Subquery

from board.card_extras import card_extra_annotations
from board.cards import card_html
from board.models import Campaign, Task
from config.api.errors import DomainError
from ledger.models import Event, ToolInvocation
from runners.models import Run
from sessions_app.models import Agent
from workspaces.models import Artifact

COLUMNS = list(Task.Status)
DETAIL_ROWS = 50  # history, tool calls and artifacts shown in the panel; the session page has the rest

# What a card shows; the description and error can be long and are read by the detail panel only.
CARD_FIELDS = (
    "id",
    "title",
    "status",
    "priority",
    "rank",
    "labels",
    "created_at",
    "assignee__id",
    "assignee__slug",
    "assignee__display_name",
    "assignee__emoji",
    "campaign__id",
    "campaign__name",
    "session__id",
    "session__status",
)


@dataclass
class Column:
    status: str
    label: str
    tasks: list[Task] = field(default_factory=list)
    cards: list[str] = field(default_factory=list)  # each task's card HTML, in order

    @property
    def count(self) -> int:
        return len(self.tasks)


def board_task_list() -> QuerySet[Task]:
    """Every card with what it shows, in column order (rank, then id for equal ranks).

    ``run_status``/``run_runner``: the task's active run, if any, for the card's badge. Subqueries
    in the one query, each an index lookup (``run_one_active_per_task`` is a partial unique index).
    What apps above board show on cards (``board/card_extras.py``) is annotated in the same query.
    """
    active = Run.objects.filter(task=OuterRef("pk"), status__in=Run.ACTIVE)
    return (
        Task.objects.select_related("assignee", "campaign", "session")
        .only(*CARD_FIELDS)
        .annotate(
            run_status=Subquery(active.values("status")[:1]),
            run_runner=Subquery(active.values("runner__name")[:1]),
            **card_extra_annotations(),
        )
        .order_by("rank", "id")
    )


def board_columns(*, tasks: QuerySet[Task], task_url_prefix: str) -> list[Column]:
    """The seven columns, each with its cards in rank order and their HTML: one query."""
    columns = {status.value: Column(status=status.value, label=status.label) for status in COLUMNS}
    for task in tasks:
        column = columns[task.status]
        column.tasks.append(task)
        column.cards.append(card_html(task, task_url_prefix=task_url_prefix))
    return list(columns.values())


def board_cards(*, task_ids: list[int]) -> list[Task]:
    return list(board_task_list().filter(pk__in=task_ids))


def board_column_counts() -> dict[str, int]:
    """How many cards each column holds, over the whole board (pushes carry these)."""
    counts = dict.fromkeys(Task.Status.values, 0)
    for row in Task.objects.order_by().values("status").annotate(n=Count("pk")):
        counts[row["status"]] = row["n"]
    return counts


def board_filter_choices() -> dict:
    """The agents and campaigns the filter form offers: two queries, whatever the board's size."""
    return {
        "agents": list(Agent.objects.order_by("slug").only("slug", "display_name", "emoji")),
        "campaigns": list(Campaign.objects.order_by("name").only("id", "name")),
    }


def board_labels(*, columns: list[Column]) -> list[str]:
    """Labels on the cards shown, for the label filter's suggestions (no query)."""
    return sorted({label for column in columns for task in column.tasks for label in task.labels or []})


@dataclass
class TaskDetail:
    task: Task
    events: list[Event]
    tool_calls: list[ToolInvocation]
    artifacts: list[Artifact]


def task_detail(*, task_id: int) -> TaskDetail:
    """A task with its history, and its session's tool calls and artifacts (the latest of each)."""
    task = Task.objects.select_related("assignee", "campaign", "session").filter(pk=task_id).first()
    if task is None:
        raise DomainError(f"Task {task_id} not found.", code="not_found")
    events = list(
        Event.objects.filter(subject_type="task", subject_id=str(task.pk)).order_by("-created_at", "-id")[:DETAIL_ROWS]
    )
    tool_calls: list[ToolInvocation] = []
    artifacts: list[Artifact] = []
    if task.session is not None:
        tool_calls = list(
            ToolInvocation.objects.filter(session_id=task.session_id).order_by("-started_at", "-id")[:DETAIL_ROWS]
        )
        if task.session.workspace_id is not None:
            artifacts = list(
                Artifact.objects.filter(workspace_id=task.session.workspace_id).order_by("path")[:DETAIL_ROWS]
            )
    return TaskDetail(task=task, events=events, tool_calls=tool_calls, artifacts=artifacts)
