"""The repository part of a task's panel, included by templates/board/_detail.html.

An inclusion tag so that the panel's views need not know about it: the part reads what it shows
itself (one query), and composition/board_pages/task_repository_views.py renders the same partial after a change.
"""

from django import template

from board.selectors import task_repository_box as repository_box_read
from config.pages import BOARD, user_may

register = template.Library()


@register.inclusion_tag("board/_task_repository.html", takes_context=True)
def task_repository_box(context, task):
    request = context.get("request")
    user = getattr(request, "user", None) or context.get("user")
    return {
        "box": repository_box_read(task=task),
        "may_edit": bool(user and user_may(user, BOARD)),  # as the view and task_set_repository allow
        "csrf_token": context.get("csrf_token"),
        "request": request,
    }
