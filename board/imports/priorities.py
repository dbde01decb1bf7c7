"""Priority files (REPORTS_DIR/*.md) into tasks: list, preview, apply.

What a re-import does to a task that already exists:
- title, description, priority, labels and suggested agent follow the file, whoever holds the task;
- status and assignee of a task an agent holds (in progress) or a person reviews are never touched;
- a ticked item (``[x]``) marks its task done unless an agent holds it;
- a ``repo:<name>`` label sets the task's repository when a repository of that name is registered
  (an unknown name is a warning in the preview and the result, and the task is imported without
  one); an item without the label leaves a repository set on the card alone;
- an unticked item never reopens a task the board moved on (an agent finishing work does not tick
  the file), except one this import had blocked as gone: that goes back to ready.
An item that disappeared ("gone") is never deleted: a task nobody started (backlog or ready) is
moved to blocked with a note in ``error``; a started one is left alone and listed as kept.
"""

from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from board.imports.access import import_authorise
from board.imports.files import ImportFile, import_file_read, import_files_list
from board.imports.priority_parse import PriorityItem, priority_file_parse
from board.live import board_push_tasks
from board.models import Task
from board.services import RANK_STEP
from config.actors import Actor
from config.api.errors import DomainError
from ledger.events import event_record
from workspaces.models import Repository

SUFFIX = ".md"
MAX_ITEMS = 2000
GONE_NOTE = "Removed from priority file"
UNSTARTED = (Task.Status.BACKLOG, Task.Status.READY)
# Statuses the file may not move: an agent holds the task, or a person is checking its work.
HELD = (Task.Status.IN_PROGRESS, Task.Status.REVIEW)
FOLLOWED = ("title", "description", "priority", "labels", "suggested_agent")


@dataclass(frozen=True)
class ChangedTask:
    task_id: int
    title: str
    status: str
    changes: dict[str, tuple[Any, Any]]  # field -> (now, after the import)


@dataclass(frozen=True)
class GoneTask:
    task_id: int
    title: str
    status: str
    priority: str
    action: str  # "block" (nobody started it) or "keep" (started: left alone)


@dataclass(frozen=True)
class PriorityPreview:
    file_name: str
    new: list[PriorityItem] = field(default_factory=list)
    changed: list[ChangedTask] = field(default_factory=list)
    unchanged: list[int] = field(default_factory=list)
    gone: list[GoneTask] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # imported anyway: e.g. an unknown repo:<name>


@dataclass(frozen=True)
class PriorityApplyResult:
    file_name: str
    created: list[int]
    updated: list[int]
    blocked: list[int]
    kept: list[int]
    unchanged: int
    warnings: list[str] = field(default_factory=list)

    @property
    def changed_anything(self) -> bool:
        return bool(self.created or self.updated or self.blocked)


def priorities_files() -> list[ImportFile]:
    return import_files_list(root=settings.REPORTS_DIR, suffix=SUFFIX)


def priorities_preview(*, file_name: object) -> PriorityPreview:
    """What applying ``file_name`` would do now; reads only."""
    name, items = _read(file_name)
    return _plan(name, items, _existing(name), _repositories(items))


def priorities_apply(*, actor: Actor, file_name: object) -> PriorityApplyResult:
    """Apply ``file_name`` in one transaction. Running it twice changes nothing the second time."""
    import_authorise(actor=actor, what="Importing priority files")
    name, items = _read(file_name)
    with transaction.atomic():
        repositories = _repositories(items)
        plan = _plan(name, items, _existing(name, lock=True), repositories)
        created = _create(actor=actor, name=name, items=plan.new, repositories=repositories)
        updated = [
            change.task_id for change in plan.changed if _update(actor=actor, change=change, repositories=repositories)
        ]
        blocked = [gone.task_id for gone in plan.gone if gone.action == "block" and _block(actor, name, gone)]
        result = PriorityApplyResult(
            file_name=name,
            created=created,
            updated=updated,
            blocked=blocked,
            kept=[gone.task_id for gone in plan.gone if gone.action == "keep"],
            unchanged=len(plan.unchanged),
            warnings=plan.warnings,
        )
        if result.changed_anything:
            event_record(
                name="priorities.imported",
                subject_type="priority_file",
                subject_id=name,
                actor=actor.label,
                payload={"created": len(created), "updated": len(updated), "blocked": len(blocked)},
            )
            board_push_tasks(task_ids=created + updated + blocked)
    return result


def _read(file_name: object) -> tuple[str, list[PriorityItem]]:
    text = import_file_read(root=settings.REPORTS_DIR, name=file_name, suffix=SUFFIX, folder="REPORTS_DIR")
    name = str(file_name)
    items = priority_file_parse(text, file_name=name)
    if len(items) > MAX_ITEMS:
        raise DomainError(f"{name!r} has {len(items)} checkbox items; at most {MAX_ITEMS} are imported at once.")
    return name, items


def _existing(name: str, *, lock: bool = False) -> dict[str, Task]:
    tasks = Task.objects.filter(source_file=name).exclude(source_key="").select_related("repository").order_by("pk")
    if lock:
        # Held until commit, so an agent's claim waits for the import instead of racing its status change.
        tasks = tasks.select_for_update(of=("self",))  # the task rows; the repository is only read
    return {task.source_key: task for task in tasks}


def _is_retired(task: Task) -> bool:
    return task.status == Task.Status.BLOCKED and task.error.startswith(GONE_NOTE)


def _repositories(items: list[PriorityItem]) -> dict[str, Repository]:
    """The registered repositories the items' ``repo:<name>`` labels name, by name (one query)."""
    names = {item.repository for item in items if item.repository}
    return {repo.name: repo for repo in Repository.objects.filter(name__in=names)} if names else {}


def _plan(
    name: str, items: list[PriorityItem], existing: dict[str, Task], repositories: dict[str, Repository]
) -> PriorityPreview:
    preview = PriorityPreview(file_name=name)
    for item in items:
        if item.repository and item.repository not in repositories:
            preview.warnings.append(
                f"Line {item.line}: no repository is registered as {item.repository!r} (label "
                f"repo:{item.repository}); the task is imported without one."
            )
        task = existing.get(item.key)
        if task is None:
            preview.new.append(item)
            continue
        changes = _changes(task, item, repositories)
        if changes:
            preview.changed.append(ChangedTask(task.pk, task.title, task.status, changes))
        else:
            preview.unchanged.append(task.pk)
    keys = {item.key for item in items}
    for key, task in existing.items():
        if key in keys or _is_retired(task):
            continue
        action = "block" if task.status in UNSTARTED else "keep"
        preview.gone.append(GoneTask(task.pk, task.title, task.status, task.priority, action))
    return preview


def _changes(task: Task, item: PriorityItem, repositories: dict[str, Repository]) -> dict[str, tuple[Any, Any]]:
    wanted = {
        "title": item.title,
        "description": item.description,
        "priority": item.priority,
        "labels": list(item.labels),
        "suggested_agent": item.suggested_agent,
    }
    changes = {name: (getattr(task, name), value) for name, value in wanted.items() if getattr(task, name) != value}
    # By name, as the preview shows it; only a known name moves it (no label, or an unknown one,
    # leaves what a person set on the card).
    current = task.repository.name if task.repository_id is not None else None
    if item.repository in repositories and item.repository != current:
        changes["repository"] = (current, item.repository)
    status = _wanted_status(task, item)
    if status is not None and status != task.status:
        changes["status"] = (task.status, status)
        if _is_retired(task):
            changes["error"] = (task.error, "")
    return changes


def _wanted_status(task: Task, item: PriorityItem) -> str | None:
    if task.status in HELD:
        return None
    if item.done:
        return Task.Status.DONE
    if _is_retired(task):
        return Task.Status.READY
    return None


def _status_of(item: PriorityItem) -> str:
    return Task.Status.DONE if item.done else Task.Status.READY


def _create(*, actor: Actor, name: str, items: list[PriorityItem], repositories: dict[str, Repository]) -> list[int]:
    """Insert the new items at the end of their columns, in file order; one task.created each."""
    if not items:
        return []
    now = timezone.now()
    statuses = {_status_of(item) for item in items}
    tops = dict(
        Task.objects.filter(status__in=statuses)
        .order_by()
        .values_list("status")
        .annotate(top=Max("rank"))
        .values_list("status", "top")
    )
    rows = []
    for item in items:
        status = _status_of(item)
        tops[status] = (tops.get(status) or 0) + RANK_STEP
        rows.append(
            Task(
                title=item.title,
                description=item.description,
                status=status,
                priority=item.priority,
                rank=tops[status],
                labels=list(item.labels),
                repository=repositories.get(item.repository),
                suggested_agent=item.suggested_agent,
                source_file=name,
                source_key=item.key,
                finished_at=now if status == Task.Status.DONE else None,
            )
        )
    try:
        # A savepoint keeps the failure readable; the outer transaction then rolls everything back.
        with transaction.atomic():
            tasks = Task.objects.bulk_create(rows)
    except IntegrityError:
        raise DomainError(f"Another import of {name!r} ran at the same time; run it again.", code="conflict") from None
    for task in tasks:
        _event("task.created", task.pk, actor, title=task.title, status=task.status, source_file=name)
    return [task.pk for task in tasks]


def _update(*, actor: Actor, change: ChangedTask, repositories: dict[str, Repository]) -> bool:
    """Write one task's changes; conditional on its status, so a task claimed meanwhile keeps its holder."""
    values = {name: after for name, (_, after) in change.changes.items()}
    if "repository" in values:
        values["repository"] = repositories[values["repository"]]
    now = timezone.now()
    if values.get("status") == Task.Status.DONE:
        values["finished_at"] = now
    rows = Task.objects.filter(pk=change.task_id, status=change.status).update(**values, updated_at=now)
    if rows != 1:
        return False
    moved = {"to": values["status"]} if "status" in values else {}
    _event(
        "task.updated",
        change.task_id,
        actor,
        title=values.get("title", change.title),
        status=values.get("status", change.status),
        fields=sorted(change.changes),
        **moved,
    )
    return True


def _block(actor: Actor, name: str, gone: GoneTask) -> bool:
    note = f"{GONE_NOTE} {name!r}: blocked by the import on {timezone.now():%Y-%m-%d %H:%M} UTC."
    rows = Task.objects.filter(pk=gone.task_id, status__in=UNSTARTED).update(
        status=Task.Status.BLOCKED, error=note, updated_at=timezone.now()
    )
    if rows == 1:
        _event(
            "task.moved", gone.task_id, actor, title=gone.title, status=Task.Status.BLOCKED, to="blocked", reason=note
        )
    return rows == 1


def _event(name: str, task_id: int, actor: Actor, *, title: str, **payload) -> None:
    event_record(
        name=name, subject_type="task", subject_id=task_id, actor=actor.label, payload={"title": title[:200], **payload}
    )
