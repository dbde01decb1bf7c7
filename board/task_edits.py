"""A task's fields edited by people in the card panel (title, description, priority, labels,
campaign; the repository has its own part, ``task_set_repository``).

The page's form parses and checks the input (composition/board_pages/task_forms.py); this writes
the fields that changed, records ``task.updated`` with their names and pushes the card, so every
open board sees the edit as it sees a move.
"""

from django.db import transaction

from board.live import board_push_tasks
from board.models import Task
from board.services import require_board_editor, task_event
from config.actors import Actor
from config.api.errors import DomainError
from config.run_scope import require_task

EDITABLE_FIELDS = ("title", "description", "priority", "labels", "campaign", "repository")
_FOREIGN_KEYS = ("campaign", "repository")


def _stored(task: Task, field: str):
    """A field's value as compared: a foreign key by its id (no read of the row it points to)."""
    if field in _FOREIGN_KEYS:
        return getattr(task, f"{field}_id")
    return getattr(task, field)


def _given(field: str, value):
    if field in _FOREIGN_KEYS:
        return value.pk if value is not None else None
    return value


@transaction.atomic
def task_edit(*, actor: Actor, task: Task, changes: dict) -> tuple[Task, list[str]]:
    """Set the fields in ``changes`` (names from EDITABLE_FIELDS, values already checked: a
    Campaign or Repository or None for those two); returns the task and the fields that changed.

    Locks the task row: two people saving at once write one after the other, each only the
    fields they changed, so neither undoes the other's edit of another field.
    """
    require_board_editor(actor=actor, what="Editing a task")
    require_task(actor=actor, task_id=task.pk)
    unknown = sorted(set(changes) - set(EDITABLE_FIELDS))
    if unknown:
        raise DomainError(f"These fields can't be edited here: {', '.join(unknown)}.")
    # of=self: PostgreSQL cannot lock the nullable side of an outer join.
    task = Task.objects.select_for_update(of=("self",)).filter(pk=task.pk).first()
    if task is None:
        raise DomainError("The task was deleted meanwhile.", code="not_found")
    changed = [
        field for field in EDITABLE_FIELDS if field in changes and _stored(task, field) != _given(field, changes[field])
    ]
    if not changed:
        return task, []
    for field in changed:
        setattr(task, field, changes[field])
    task.save(update_fields=[*changed, "updated_at"])
    task_event("task.updated", task, actor, fields=changed)
    board_push_tasks(task_ids=[task.pk])
    return task, changed
