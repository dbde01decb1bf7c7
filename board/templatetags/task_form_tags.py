"""The card panel's edit part (``task_edit_form``, included by templates/board/_detail.html).

Inclusion tags so that the board's and the panel's views need not know about the form: the part
reads its choices itself, and composition/board_pages/task_form_views.py renders the same
partials, with what was posted and its errors, when a save is refused.
"""

from django import template

from board.task_form_selectors import task_form_view
from config.pages import BOARD, user_may

register = template.Library()


def _user_context(context) -> dict:
    request = context.get("request")
    user = getattr(request, "user", None) or context.get("user")
    return {
        "may_edit": bool(user and user_may(user, BOARD)),  # as the views and the services allow
        "csrf_token": context.get("csrf_token"),
        "request": request,
    }


@register.inclusion_tag("board/_task_edit.html", takes_context=True)
def task_edit_form(context, task):
    # After a save or a refused one, the view hands the form it rendered (values, errors, message).
    given = context.get("task_edit")
    form = given if given is not None and given.task is not None and given.task.pk == task.pk else None
    return {"form": form or task_form_view(task=task), "task": task, **_user_context(context)}
