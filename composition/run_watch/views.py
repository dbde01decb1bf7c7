"""The run watch's parts on a task's panel: the conversation (polled; 204 while nothing changed, so
what a person unfolded stays unfolded) and the raw log (its tail, then what it grew by). For the
people of the board, product owners included; thin: selectors read."""

from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from composition.run_watch.selectors import run_log_following, run_watch, watch_digest
from config.api.errors import DomainError
from config.pages import BOARD, page_for
from runners.models import Run
from runners.page_selectors import task_get
from sessions_app.logs import DEFAULT_CHUNK, session_log_read, session_log_tail_offset

NOT_CHANGED = 204  # htmx swaps nothing on a 204


def _task(task_id: int):
    try:
        return task_get(task_id=task_id)
    except DomainError as error:
        raise Http404(error.message) from None


def _offset(raw: str) -> int | None:
    return int(raw) if raw.isascii() and raw.isdigit() and len(raw) < 19 else None


@require_GET
@page_for(BOARD)
def task_run_watch(request, task_id: int):
    task = _task(task_id)
    seen = request.GET.get("digest", "")
    if seen:
        _, digest = watch_digest(task=task)
        if digest == seen:
            return HttpResponse(status=NOT_CHANGED)
    return render(request, "run_watch/_run_watch.html", {"watch": run_watch(task=task)})


@require_GET
@page_for(BOARD)
def task_run_log(request, task_id: int, run_id: int):
    """The run's raw log: without ``offset`` its last 64 KiB and a poller; with one, what it grew by."""
    task = _task(task_id)
    run = Run.objects.filter(pk=run_id, task=task).select_related("session__agent").first()
    if run is None:
        raise Http404(f"Task {task.pk} has no run {run_id}.")
    raw = request.GET.get("offset")
    offset = _offset(raw) if raw is not None else None
    if raw is not None and offset is None:
        return HttpResponse(
            "offset must be a byte offset: a whole number, 0 or more.", status=400, content_type="text/plain"
        )
    context = {"task": task, "run": run, "append": offset is not None, "following": run_log_following(run=run)}
    if run.session is not None:
        start = offset if offset is not None else session_log_tail_offset(session=run.session, window=DEFAULT_CHUNK)
        context["log"] = session_log_read(session=run.session, offset=start)
        context["cut"] = offset is None and start > 0
    return render(request, "run_watch/_run_log.html", context)
