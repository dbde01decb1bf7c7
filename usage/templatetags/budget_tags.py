"""The card panel's budget box, included by board's panel template: ``{% load budget_tags %}`` names a tag
library, not an import, so board keeps to its layer while usage reads its own rows."""

from django import template

from usage.budget_pages import card_budget_lines as budget_card_lines
from usage.budget_pages import may_edit_budgets, task_budget_box

register = template.Library()


@register.inclusion_tag("usage/_task_budget.html", takes_context=True)
def task_budget_panel(context, task):
    request = context.get("request")
    user = getattr(request, "user", None) or context.get("user")
    return {
        "box": task_budget_box(task=task),
        "may_edit": may_edit_budgets(user),
        "csrf_token": context.get("csrf_token"),
        "request": request,
    }


@register.simple_tag
def card_budget_lines(task):
    """The card's budget banner lines (usage/budget_pages.py: card_budget_lines)."""
    return budget_card_lines(task)
