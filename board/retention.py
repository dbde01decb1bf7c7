"""The board's part of the archive's retention rule (workspaces/archive/selectors.py): a worktree's
workspace is due once at least one task was worked on in it and every such task is done, the last
finished before the cutoff. Registered with workspaces/archive/worktree_rules.py by board's app."""

from datetime import datetime

from django.db.models import Exists, Q
from django.db.models.functions import Coalesce

from board.models import Task
from workspaces.archive.selectors import works_on_the_worktree
from workspaces.archive.worktree_rules import worktree_retention_rule_register


def worktree_tasks_done(*, cutoff: datetime) -> Q:
    """On Worktree rows: a task linked to it (through its session), and none not done or finished
    on or after ``cutoff`` (a task without ``finished_at`` counts from its last change)."""
    linked_tasks = Task.objects.filter(works_on_the_worktree("session__"))
    late = linked_tasks.annotate(ended=Coalesce("finished_at", "updated_at")).filter(
        Q(ended__gte=cutoff) | ~Q(status=Task.Status.DONE)
    )
    return Q(Exists(linked_tasks)) & ~Q(Exists(late))


def worktree_retention_register() -> None:
    worktree_retention_rule_register(name="board-tasks-done", rule=worktree_tasks_done)
