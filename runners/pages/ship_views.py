"""The card's Ship buttons: merge (or squash), ask the agent to resolve a conflict, push and open a
pull request. Thin: the ship services decide; a refusal is shown in the box (status 200 under htmx,
which swaps only 2xx answers; without htmx a message on the task's page, as the run box does).

A person on the board confirms a merge of a change that is not approved with the form's checkbox
(``force``): the API takes ``force`` from staff only, the board from the person who ticks it."""

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from config.actors import Actor
from config.api.errors import DomainError
from config.pages import BOARD, page_for
from runners.page_selectors import task_get
from runners.ship_merge import STRATEGIES, task_merge, task_merge_resolve_run
from runners.ship_pull_request import task_pull_request
from runners.ship_selectors import task_ship_box


def _task(task_id: int):
    try:
        return task_get(task_id=task_id)
    except DomainError as error:
        raise Http404(error.message) from None


def _answer(request, task, *, error: str = "", files=None, done: str = ""):
    if not request.htmx:
        (messages.error if error else messages.success)(request, error or done)
        return redirect("board:task", task_id=task.pk)
    box = task_ship_box(task=task, error=error, conflict_files=files, done=done)
    # The panel's Column badge is outside the box: swapped out of band, so a merge shows "Done" there too.
    return render(request, "runners/_task_ship.html", {"box": box, "may_ship": True, "column_too": True})


@require_POST
@page_for(BOARD)
def task_merge_view(request, task_id: int):
    task = _task(task_id)
    strategy = request.POST.get("strategy", "merge")
    if strategy not in STRATEGIES:
        return _answer(request, task, error="Choose merge or squash.")
    try:
        result = task_merge(
            actor=Actor(user=request.user), task=task, strategy=strategy, force=request.POST.get("force") == "on"
        )
    except DomainError as exc:
        return _answer(request, task, error=exc.message, files=exc.extra.get("files"))
    return _answer(request, task, done=result.message)


@require_POST
@page_for(BOARD)
def task_merge_resolve_view(request, task_id: int):
    task = _task(task_id)
    try:
        run = task_merge_resolve_run(actor=Actor(user=request.user), task=task)
    except DomainError as exc:
        return _answer(request, task, error=exc.message)
    return _answer(request, task, done=f"Run #{run.pk} queued: the agent is asked to resolve the conflict.")


@require_POST
@page_for(BOARD)
def task_pull_request_view(request, task_id: int):
    task = _task(task_id)
    try:
        _, message = task_pull_request(actor=Actor(user=request.user), task=task)
    except DomainError as exc:
        return _answer(request, task, error=exc.message)
    return _answer(request, task, done=message)
