"""The kanban board page, its task panel and card moves. Thin: selectors read, task_move writes
(through runners/card_moves.py, which also stops the run of a card dragged out of In progress)."""

from django.http import Http404, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from board.cards import board_columns, board_labels
from board.live import board_cards_render, board_seq_current, task_url_prefix
from board.models import Task
from board.selectors import board_filter_choices, board_task_list, task_detail
from composition.board_pages.filters import BoardFilter
from config.actors import Actor
from config.api.errors import DomainError
from config.pages import BOARD, page_for
from runners.card_moves import task_move_stopping_runs

FILTER_NAMES = ("assignee", "campaign", "priority", "label", "q")


@require_GET
@page_for(BOARD)
def board(request):
    filters = BoardFilter(request.GET, queryset=board_task_list())
    valid = filters.is_valid()
    tasks = filters.qs if valid else board_task_list()
    columns = board_columns(tasks=tasks, task_url_prefix=task_url_prefix())
    context = {
        "columns": columns,
        "seq": board_seq_current(),
        "filtered": valid and any(request.GET.get(name) for name in FILTER_NAMES),
        "task_url_prefix": task_url_prefix(),
    }
    # A filter change or a refetch after a missed push swaps just the columns; a history restore
    # (back button) needs the whole page.
    if request.htmx and not request.htmx.history_restore_request:
        return render(request, "board/_columns.html", context)
    context |= {
        "choices": board_filter_choices(),
        "priorities": Task.Priority.choices,
        "labels": board_labels(columns=columns),
        "query": {name: request.GET.get(name, "") for name in FILTER_NAMES},
        "filter_errors": "" if valid else "; ".join(f"{k}: {' '.join(v)}" for k, v in filters.errors.items()),
    }
    return render(request, "board/board.html", context)


@require_GET
@page_for(BOARD)
def task_panel(request, task_id: int):
    try:
        detail = task_detail(task_id=task_id)
    except DomainError as error:
        raise Http404(error.message) from None
    template = "board/_detail.html" if request.htmx else "board/task_detail.html"
    return render(request, template, {"detail": detail})


def _optional_id(value: str | None, name: str) -> int | None:
    if value in (None, ""):
        return None
    if not value.isdigit() or len(value) > 18:
        raise DomainError(f"{name} must be a task id.")
    return int(value)


@require_POST
@page_for(BOARD)
def task_move_view(request, task_id: int):
    """Move a card; answers the moved card(s) and column counts as the push would, or a message."""
    try:
        result = task_move_stopping_runs(
            actor=Actor(user=request.user),
            task_id=task_id,
            status=request.POST.get("status", ""),
            before_id=_optional_id(request.POST.get("before_id"), "before_id"),
            after_id=_optional_id(request.POST.get("after_id"), "after_id"),
        )
    except DomainError as error:
        return JsonResponse({"message": error.message}, status=error.status_code)
    return JsonResponse({"renumbered": result.renumbered, **board_cards_render(task_ids=result.changed_ids)})
