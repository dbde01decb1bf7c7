"""Writes the pages make on runs, composed from runners/services.py.

Why a module of its own: "Start job" on the priorities and campaigns pages is a board import
(board/imports/), and the board must not know about runners (runners depends on board, not the
other way round). So the page view calls the import, and then, after the import has committed,
``runs_queue_for_tasks`` here: a run that can't be queued (no permission, one already active)
never undoes the import, and each run is queued in its own transaction.
"""

from dataclasses import dataclass, field

from django.db import transaction

from board.live import board_push_tasks
from board.models import Task
from board.services import task_create
from config.actors import Actor
from config.api.errors import DomainError
from runners import run_waiting
from runners.models import Run
from runners.services import run_queue


@dataclass
class RunsQueued:
    provider: str
    runs: list[Run] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # one message per task whose run was refused


def runs_queue_for_tasks(*, actor: Actor, task_ids: list[int], provider: str) -> RunsQueued | None:
    """Queue a run of ``provider`` for each of ``task_ids`` that is ready, in board order.

    None when no provider was chosen ("don't start agents"). Stops at the first refusal that
    would refuse every task alike (not allowed, a bad provider name); a task that already has
    an active run is skipped with its message.
    """
    provider = (provider or "").strip()
    if not provider:
        return None
    result = RunsQueued(provider=provider)
    tasks = Task.objects.filter(pk__in=task_ids, status=Task.Status.READY).order_by("rank", "id")
    for task in tasks:
        try:
            result.runs.append(run_queue(actor=actor, task=task, provider=provider))
        except DomainError as error:
            result.refused.append(error.message)
            if error.code != "conflict":
                break
    return result


@transaction.atomic
def task_create_and_run(*, actor: Actor, provider: str = "", **fields) -> tuple[Task, Run | None]:
    """A task from the board's "+ New task", ready, and its first run when a provider is chosen
    ("Run now with"). One transaction, unlike the imports above: the form is one thing the person
    asked for, so a refused run (a bad provider, not allowed) leaves no task behind, and the error
    names the form's ``run_with`` field."""
    task = task_create(actor=actor, status=Task.Status.READY, **fields)
    if not provider:
        return task, None
    try:
        run = run_queue(actor=actor, task=task, provider=provider)
    except DomainError as error:
        raise DomainError(error.message, code=error.code, extra={"errors": {"run_with": [error.message]}}) from None
    return task, run


def run_stop(*, actor: Actor, run: Run) -> Run:
    """Stop from a page: run_waiting.run_stop (a queued or waiting run ends at once), and the card
    shows "stopping" at once. A run already handed out records no event until its runner reports it cancelled, so the card is pushed here."""
    stopped = run_waiting.run_stop(actor=actor, run=run)
    board_push_tasks(task_ids=[stopped.task_id])
    return stopped
