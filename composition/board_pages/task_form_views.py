"""The board's "+ New task" form, its markdown preview, and the card panel's edit part. Thin: the
form (task_forms.py) checks the input, one service writes (runners/services_pages.task_create_and_run,
board/task_edits.task_edit), the form's selector reads.

A refused form answers 400 (403, 409 from a service) with the form again, each error by its field
and what was typed kept; the page's script lets htmx swap those answers in (static/js/task_form.js).
"""

import json

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from board.selectors import task_detail
from board.task_edits import task_edit
from board.task_form_selectors import FIELDS, task_form_view
from composition.board_pages.task_forms import DESCRIPTION_MAX, NewTaskForm, TaskForm
from config.actors import Actor
from config.api.errors import DomainError
from config.pages import BOARD, page_for
from runners.page_selectors import task_get
from runners.services_pages import task_create_and_run


def _errors(form_errors) -> dict[str, list[str]]:
    return {name: list(messages_) for name, messages_ in form_errors.items()}


def _refusal_errors(error: DomainError) -> dict[str, list[str]]:
    return error.extra.get("errors") or {"__all__": [error.message]}


@require_http_methods(["GET", "POST"])
@page_for(BOARD)
def task_new(request):
    """GET: the empty form (the board page has it already; this serves the page without JavaScript).
    POST: create the task, and its first run with "Run with"."""
    template = "board/_new_task.html" if request.htmx else "board/task_new.html"
    if request.method == "GET":
        return render(request, template, {"form": task_form_view()})
    form = NewTaskForm(request.POST)
    if not form.is_valid():
        return _new_refused(request, template, _errors(form.errors), status=400)
    data = dict(form.cleaned_data)
    provider = data.pop("run_with")
    try:
        task, run = task_create_and_run(actor=Actor(user=request.user), provider=provider, **data)
    except DomainError as error:
        return _new_refused(request, template, _refusal_errors(error), status=error.status_code)
    text = f"Created “{task.title}”" + (f" and queued a run with {run.provider}." if run else ".")
    if not request.htmx:
        messages.success(request, text)
        return redirect("board:task", task_id=task.pk)
    response = render(request, template, {"form": task_form_view(message=text)})
    # The board closes the form and puts the focus on the new card when its push arrives.
    response["HX-Trigger"] = json.dumps({"taskCreated": {"id": task.pk, "message": text}})
    return response


def _new_refused(request, template, errors, *, status: int):
    form = task_form_view(values=request.POST, errors=errors)
    form.values["run_with"] = request.POST.get("run_with", "")  # the provider chosen stays chosen
    return render(request, template, {"form": form}, status=status)


@require_POST
@page_for(BOARD)
def task_preview(request):
    """The description as the card panel will show it: the same markdown filter, so the same
    sanitising (nh3; images from other sites dropped)."""
    text = request.POST.get("description", "")
    if len(text) > DESCRIPTION_MAX:
        context = {"error": f"Too long to preview: at most {DESCRIPTION_MAX:,} characters."}
        return render(request, "board/_markdown_preview.html", context, status=400)
    return render(request, "board/_markdown_preview.html", {"text": text})


def _changed_fields(post) -> list[str]:
    """The fields the person changed: posted, and different from what the form showed (``was-``)."""
    return [name for name in FIELDS if name in post and post.get(name) != post.get(f"was-{name}")]


@require_POST
@page_for(BOARD)
def task_edit_view(request, task_id: int):
    try:
        task = task_get(task_id=task_id)
    except DomainError as error:
        raise Http404(error.message) from None
    changed = _changed_fields(request.POST)
    form = TaskForm(request.POST)
    form.is_valid()
    errors = {name: list(errs) for name, errs in form.errors.items() if name in changed}
    status, message = 200, ""
    if not errors:
        try:
            task, saved = task_edit(
                actor=Actor(user=request.user), task=task, changes={name: form.cleaned_data[name] for name in changed}
            )
            message = f"Saved: {', '.join(saved)}." if saved else "Nothing changed."
        except DomainError as error:
            errors, status = _refusal_errors(error), error.status_code
    if errors and status == 200:
        status = 400
    if not request.htmx:
        if errors:
            messages.error(request, " ".join(f"{name}: {' '.join(errs)}" for name, errs in errors.items()))
        else:
            messages.success(request, message)
        return redirect("board:task", task_id=task.pk)
    detail = task_detail(task_id=task.pk)
    if errors:
        edit = task_form_view(task=detail.task, values=request.POST, was=_was(request.POST), errors=errors, open=True)
    else:
        edit = task_form_view(task=detail.task, message=message, open=True)
    return render(request, "board/_detail.html", {"detail": detail, "task_edit": edit}, status=status)


def _was(post) -> dict[str, str]:
    return {name: post[f"was-{name}"] for name in FIELDS if f"was-{name}" in post}
