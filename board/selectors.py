"""Reads for the board: tasks and campaigns, the kanban page, its pushes and a task's panel.

The page and the pushes render cards from the same queryset, so a card looks the same however
it reached the screen, and the page costs the same number of queries for 3 cards or 3,000.
The repository part of a task's panel shows which repository the task's runs work in, and the
registered ones a person may pick instead.
"""

import threading
from dataclasses import dataclass

from django.db.models import Count, Q, QuerySet

from board.card_extras import card_extra_annotations, card_extras_key
from board.card_sql import card_annotations_compiled
from board.models import Campaign, Task
from config.actors import Actor
from config.api.errors import DomainError
from config.run_scope import require_task
from ledger.models import Event, ToolInvocation
from sessions_app.models import Agent
from workspaces.models import Artifact, Repository
from workspaces.worktrees.selectors import repository_choices


def task_get(*, task_id: int) -> Task:
    task = Task.objects.select_related("assignee", "campaign", "repository").filter(pk=task_id).first()
    if task is None:
        raise DomainError(f"Task {task_id} not found.", code="not_found")
    return task


def task_list() -> QuerySet[Task]:
    """Tasks are visible to every agent: they are the shared queue of work."""
    return Task.objects.select_related("assignee", "campaign", "repository").order_by("priority", "rank", "id")


def task_get_for_actor(*, actor: Actor, task_id: int) -> Task:
    """The task (404), if the actor may see it (403): any, but a per-run key only its run's."""
    task = task_get(task_id=task_id)
    require_task(actor=actor, task_id=task.pk)
    return task


def task_list_for_actor(*, actor: Actor) -> QuerySet[Task]:
    """Every task, but for a per-run key only its run's (SPEC §8: it reaches nothing else of the board)."""
    tasks = task_list()
    work = actor.bound_work
    if work is None:
        return tasks
    return tasks.filter(pk=work.task_id) if work.task_id is not None else tasks.none()


def campaign_get(*, campaign_id: int) -> Campaign:
    campaign = campaign_list().filter(pk=campaign_id).first()
    if campaign is None:
        raise DomainError(f"Campaign {campaign_id} not found.", code="not_found")
    return campaign


def campaign_list() -> QuerySet[Campaign]:
    return Campaign.objects.annotate(
        tasks_total=Count("tasks", distinct=True),
        tasks_done=Count("tasks", filter=Q(tasks__status=Task.Status.DONE), distinct=True),
        leads_total=Count("leads", distinct=True),
    ).order_by("-created_at", "-id")


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
    "updated_at",  # the card's data-edited: an open panel on another board follows an edit
    "assignee__id",
    "assignee__slug",
    "assignee__display_name",
    "assignee__emoji",
    "campaign__id",
    "campaign__name",
    "session__id",
    "session__status",
)


# The card query as built last in this thread, with the key it was built for (card_extras_key).
_card_query = threading.local()


def board_task_list() -> QuerySet[Task]:
    """Every card with what it shows, in column order (rank, then id for equal ranks).

    What apps above board show on cards (``board/card_extras.py``: a run's badge, usage, budgets)
    is annotated in the same query. Building those nine subqueries cost more than running the query
    (a push's card read took 12 ms of CPU against 2 before them, bench/HISTORY.md), so the queryset is
    built once per thread and handed out as a fresh copy (``.all()``: never evaluated itself), again
    whenever the extras or what they depend on (today's date for budgets) change. Per thread: a
    queryset's expressions are not made to be compiled by two threads at once. The extras' subqueries
    are compiled once when it is built (board/card_sql.py): compiling them on every read cost more
    than the rest of the read.
    """
    key = card_extras_key()
    built = getattr(_card_query, "built", None)
    if built is None or built[0] != key:
        built = _card_query.built = (key, _board_task_query())
    return built[1].all()


def _board_task_query() -> QuerySet[Task]:
    return (
        Task.objects.select_related("assignee", "campaign", "session")
        .only(*CARD_FIELDS)
        .annotate(**card_annotations_compiled(card_extra_annotations()))
        .order_by("rank", "id")
    )


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


@dataclass
class RepositoryBox:
    task: Task
    choices: list[Repository]
    current: Repository | None  # None: the run works in its session workspace
    error: str = ""
    saved: bool = False


def task_repository_box(*, task: Task, error: str = "", saved: bool = False) -> RepositoryBox:
    """One query: the registered repositories, the task's own among them (no second read for it)."""
    choices = repository_choices()
    current = next((repo for repo in choices if repo.pk == task.repository_id), None)
    return RepositoryBox(task=task, choices=choices, current=current, error=error, saved=saved)
