"""What the task form shows (the board's "+ New task" and the card panel's edit part): the values
in its fields, their errors, and the campaigns and repositories to choose from (two queries)."""

from dataclasses import dataclass, field

from django.db.models import QuerySet

from board.models import Campaign, Task
from workspaces.models import Repository
from workspaces.worktrees.selectors import repository_choices

FIELDS = ("title", "description", "priority", "labels", "campaign", "repository")


def labels_text(labels: list[str] | None) -> str:
    """A task's labels as the form's text field holds them: ``docs, web``."""
    return ", ".join(labels or [])


def task_form_values(task: Task | None) -> dict[str, str]:
    """The fields' values as text, as a browser posts them: a new task's defaults, or the task's own."""
    if task is None:
        return {
            "title": "",
            "description": "",
            "priority": Task.Priority.P2,
            "labels": "",
            "campaign": "",
            "repository": "",
        }
    return {
        "title": task.title,
        "description": task.description,
        "priority": task.priority,
        "labels": labels_text(task.labels),
        "campaign": str(task.campaign_id or ""),
        "repository": str(task.repository_id or ""),
    }


def campaign_choices() -> QuerySet[Campaign]:
    return Campaign.objects.order_by("name", "id").only("id", "name")


@dataclass
class TaskFormView:
    prefix: str  # keeps the ids of several forms on one page apart: "new", "edit-12"
    values: dict[str, str]
    campaigns: list[Campaign]
    repositories: list[Repository]
    errors: dict[str, list[str]] = field(default_factory=dict)
    task: Task | None = None
    # What the fields held when the edit form was first shown (kept through a refused save): the
    # edit view saves only the fields whose posted value differs from it.
    was: dict[str, str] = field(default_factory=dict)
    message: str = ""  # what the last save did
    open: bool = False  # the panel's edit part stays open after a save or an error

    @property
    def priorities(self) -> list[tuple[str, str]]:
        return Task.Priority.choices

    @property
    def general_errors(self) -> list[str]:
        return self.errors.get("__all__", [])


def task_form_view(
    *,
    task: Task | None = None,
    values: dict[str, str] | None = None,
    errors: dict[str, list[str]] | None = None,
    was: dict[str, str] | None = None,
    message: str = "",
    open: bool = False,
) -> TaskFormView:
    """The form for a new task (``task`` None) or for editing ``task``; ``values``: what was posted,
    shown again with ``errors`` beside their fields."""
    shown = task_form_values(task)
    before = dict(shown) if was is None else {name: str(was.get(name, shown[name])) for name in FIELDS}
    if values is not None:
        shown |= {name: str(values.get(name, shown[name])) for name in FIELDS}
    return TaskFormView(
        prefix=f"edit-{task.pk}" if task is not None else "new",
        values=shown,
        campaigns=list(campaign_choices()),
        repositories=repository_choices(),
        errors=dict(errors or {}),
        task=task,
        was=before,
        message=message,
        open=open,
    )
