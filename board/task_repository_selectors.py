"""Reads for the repository part of a task's panel: which repository the task's runs work in, and
the registered ones a person may pick instead."""

from dataclasses import dataclass

from board.models import Task
from workspaces.models import Repository
from workspaces.worktree_selectors import repository_choices


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
