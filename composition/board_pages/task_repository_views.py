"""The repository part of a task's panel: set or clear the repository its runs work in. Thin: the
selectors read, task_set_repository writes (and records ``task.repository_set``).

A refused or invalid choice is shown in the part it came from with status 200 under htmx, which
swaps only 2xx answers; without htmx it is a message on the task's page, as the run box does.
"""

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from board.selectors import task_repository_box
from board.services import task_set_repository
from config.actors import Actor
from config.api.errors import DomainError
from config.pages import BOARD, page_for
from runners.page_selectors import task_get
from workspaces.models import Repository
from workspaces.worktrees.selectors import repository_get


def _repository_chosen(value: str) -> Repository | None:
    """The repository a form names by id; empty is none. Anything else is a 400 saying what to do."""
    value = value.strip()
    if not value:
        return None
    if not value.isascii() or not value.isdigit() or len(value) > 18:
        raise DomainError("Choose a repository from the list (or none).")
    try:
        return repository_get(repository_id=int(value))
    except DomainError as error:
        raise DomainError(
            f"{error.message} It may have been removed; reload the panel to see the current list."
        ) from None


@require_POST
@page_for(BOARD)
def task_repository_view(request, task_id: int):
    try:
        task = task_get(task_id=task_id)
    except DomainError as error:
        raise Http404(error.message) from None
    error = ""
    changed = False
    try:
        repository = _repository_chosen(request.POST.get("repository", ""))
        task, changed = task_set_repository(actor=Actor(user=request.user), task=task, repository=repository)
    except DomainError as exc:
        error = exc.message
    if not request.htmx:
        (messages.error if error else messages.success)(request, error or "Repository saved.")
        return redirect("board:task", task_id=task.pk)
    box = task_repository_box(task=task, error=error, saved=changed)
    return render(request, "board/_task_repository.html", {"box": box, "may_edit": True})
