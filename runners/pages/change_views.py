"""The "Review the change" page (SPEC §10, issue 25 §3): the task's change, line comments, and the
decisions. Thin: runners.change_page reads, runners.review decides (the API's own services).

For people in the board's groups and staff, as the review API. A refused or invalid action is
shown where it was made: under htmx the comment form comes back with the service's message (200:
htmx swaps only 2xx answers); a plain form post renders the page again with the message and the
service's status, the words typed kept.
"""

import re
from functools import wraps

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from config.actors import Actor
from config.api.errors import DomainError
from config.pages import BOARD, refusal_text, user_may
from runners import page_selectors
from runners.change_lines import change_file_lines
from runners.change_page import change_file_rows, change_page_read
from runners.diff_render import SPLIT, UNIFIED, Gap, RowWriter
from runners.models import TaskReview
from runners.review import comment_create, task_review

VIEW_COOKIE = "change_view"  # unified or split, remembered for every task's change
VIEW_COOKIE_AGE = 365 * 24 * 3600
ACTIONS = {"approve", "request_changes", "another"}


def review_page(view):
    """Signed in, and staff or in the board's groups (the review API's people); else 403."""

    @wraps(view)
    def wrapped(request, *args, **kwargs):
        if not (request.user.is_staff or user_may(request.user, BOARD)):
            raise PermissionDenied(refusal_text(request.user, BOARD))
        return view(request, *args, **kwargs)

    return login_required(wrapped)


def _task(task_id: int):
    try:
        return page_selectors.task_get(task_id=task_id)
    except DomainError as error:
        raise Http404(error.message) from None


def _view_of(request) -> str:
    chosen = request.GET.get("view") or request.POST.get("view") or request.COOKIES.get(VIEW_COOKIE)
    return chosen if chosen in (UNIFIED, SPLIT) else UNIFIED


def _context_url(task_id: int) -> str:
    return reverse("runners:task_change_lines", args=[task_id])


def _page(request, task, *, status: int = 200, form: dict | None = None) -> HttpResponse:
    view = _view_of(request)
    # ?all=1: every file's rows in the page (a browser without JavaScript follows the placeholders' link).
    rows_url = "" if request.GET.get("all") else reverse("runners:task_change_file", args=[task.pk])
    page = change_page_read(task=task, view=view, context_url=_context_url(task.pk), rows_url=rows_url)
    response = render(request, "runners/change.html", {"page": page, "form": form or {}}, status=status)
    if request.GET.get("view") == view:
        response.set_cookie(VIEW_COOKIE, view, max_age=VIEW_COOKIE_AGE, samesite="Lax")
    return response


@require_GET
@review_page
def task_change_view(request, task_id: int):
    return _page(request, _task(task_id))


@require_GET
@review_page
def task_change_lines(request, task_id: int):
    """Rows of unchanged lines for a "show more" row (htmx): ``path``, ``old``/``new`` (the first
    line's numbers), ``end`` (the last new line; 0: to the end of the file)."""
    task = _task(task_id)
    try:
        gap = Gap(old=int(request.GET["old"]), new=int(request.GET["new"]), end=int(request.GET.get("end") or 0))
        path = request.GET["path"]
    except (KeyError, ValueError):
        return HttpResponse("path, old, new and end (numbers) are needed.", status=400, content_type="text/plain")
    try:
        texts = change_file_lines(task=task, path=path, start=gap.new, end=gap.end)
    except DomainError as error:
        return HttpResponse(error.message, status=error.status_code, content_type="text/plain")
    writer = RowWriter(view=_view_of(request), context_url=_context_url(task.pk), comments={})
    return HttpResponse(writer.context_rows(path, gap, texts))


@require_GET
@review_page
def task_change_file(request, task_id: int):
    """A file's rows for its section past the page's first screen (htmx, when it scrolls into view):
    ``path`` and ``head`` (the branch's commit the page showed). Under htmx a refusal comes back as
    the section's message (htmx swaps only 2xx answers), else with its status."""
    task = _task(task_id)
    path, head, view = request.GET.get("path", ""), request.GET.get("head", ""), _view_of(request)
    try:
        if not path or not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", head):
            raise DomainError("path (a file of the change) and head (the branch's commit id) are needed.")
        rows = change_file_rows(task=task, path=path, head=head, view=view, context_url=_context_url(task.pk))
    except DomainError as error:
        if not request.htmx:
            return HttpResponse(error.message, status=error.status_code, content_type="text/plain")
        return render(request, "runners/_change_file_refused.html", {"message": error.message})
    return render(request, "runners/_change_diff.html", {"rows": rows, "view": view})


def _line_of(raw: str) -> int | None:
    return int(raw) if raw.strip().isdigit() else None


@require_POST
@review_page
def task_change_comment(request, task_id: int):
    """A comment on a line (or, without one, the whole file): the comment's row, or the form again
    with the service's message."""
    task = _task(task_id)
    path, body, raw_line = request.POST.get("path", ""), request.POST.get("body", ""), request.POST.get("line", "")
    form = {"path": path, "line": raw_line, "body": body, "view": _view_of(request)}
    error = ""
    comment = None
    line = _line_of(raw_line)
    if raw_line.strip() and line is None:
        error = f"line must be a line number, not {raw_line[:20]!r}."
    elif not body.strip():
        error = "Write the comment first."
    else:
        try:
            comment = comment_create(actor=Actor(user=request.user), task=task, path=path, line=line, body=body)
        except DomainError as exc:
            error = exc.message
    if not request.htmx:
        if error:
            return _page(request, task, status=400, form={"comment_error": error, **form})
        messages.success(request, "Comment added.")
        # Without htmx the comment's file may be past the first screen: the whole page, so its anchor is there.
        return redirect(reverse("runners:task_change", args=[task.pk]) + f"?all=1#comment-{comment.pk}")
    columns = 3 if form["view"] == UNIFIED else 4
    if error:
        context = {"task": task, "form": form, "error": error, "columns": columns, "view": form["view"]}
        return render(request, "runners/_change_comment_form.html", context)
    context = {"comments": [comment], "columns": columns, "fresh": True}
    return render(request, "runners/_change_comment_row.html", context)


@require_POST
@review_page
def task_change_review(request, task_id: int):
    """Approve, Request changes (the message and the chosen comments to the same agent session), or
    Try with another agent (a fresh session of the chosen provider on the same branch)."""
    task = _task(task_id)
    action = request.POST.get("action", "")
    message = request.POST.get("message", "")
    provider = request.POST.get("provider", "").strip()
    raw_ids = request.POST.getlist("comment")
    form = {"message": message, "provider": provider, "comment_ids": raw_ids}
    try:
        if action not in ACTIONS:
            raise DomainError(f"action must be one of {', '.join(sorted(ACTIONS))}, not {action[:40]!r}.")
        if not all(raw.isdigit() for raw in raw_ids):
            raise DomainError("The chosen comments must be comment numbers.")
        if action == "another" and not provider:
            raise DomainError("Choose the agent (provider) to try with.")
        review = task_review(
            actor=Actor(user=request.user),
            task=task,
            decision=TaskReview.Decision.APPROVE if action == "approve" else TaskReview.Decision.REQUEST_CHANGES,
            # Another agent's fresh session is told the task and the branch by the review service
            # (review_prompts.handover_prompt); with no words of the reviewer's it carries the work on.
            message=(message.strip() or "Carry the work on and finish it.") if action == "another" else message,
            provider=provider if action == "another" else None,
            comment_ids=[int(raw) for raw in raw_ids] if action != "approve" else [],
        )
    except DomainError as error:
        return _page(request, task, status=error.status_code, form={"review_error": error.message, **form})
    if review.decision == TaskReview.Decision.APPROVE:
        messages.success(request, "Approved.")
    else:
        messages.success(request, f"Changes requested: run #{review.run_id} ({review.run.provider}) is queued.")
    return redirect("runners:task_change", task_id=task.pk)
