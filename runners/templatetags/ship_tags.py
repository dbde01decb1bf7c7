"""The card's Ship box (merge, pull request), included by templates/board/_detail.html; the ship
views render the same partial after a button."""

from django import template

from config.pages import BOARD, user_may
from runners.ship_selectors import task_ship_box as ship_box_read

register = template.Library()


@register.inclusion_tag("runners/_task_ship.html", takes_context=True)
def task_ship_box(context, task):
    request = context.get("request")
    user = getattr(request, "user", None) or context.get("user")
    return {
        "box": ship_box_read(task=task),
        "may_ship": bool(user and user_may(user, BOARD)),  # as runners/pages/ship_views.py
        "csrf_token": context.get("csrf_token"),
        "request": request,
    }
