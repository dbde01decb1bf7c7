"""The change page's pieces that other templates include: the card panel's "Review the change"
link, and the highlighting colours (Pygments' own style, not a copy of it)."""

from functools import lru_cache

from django import template
from django.utils.safestring import mark_safe
from pygments.formatters import HtmlFormatter

from runners.models import Run
from workspaces.models import Worktree

register = template.Library()


@register.inclusion_tag("runners/_change_link.html")
def task_change_link(task):
    """The link, when the task has something to review: a run, or a worktree (its branch)."""
    show = task.repository_id is not None and (
        Run.objects.filter(task=task).exists()
        or Worktree.objects.filter(repository_id=task.repository_id, name=str(task.pk)).exists()
    )
    return {"task": task, "show": show}


@lru_cache(maxsize=1)
def _style_defs() -> str:
    # The token colours only (get_style_defs would also restyle every <pre> of the page).
    return "\n".join(HtmlFormatter(style="default").get_token_style_defs(".diff .code"))


@register.simple_tag
def pygments_css():
    return mark_safe(f"<style>{_style_defs()}</style>")  # Pygments' own CSS, nothing of an agent
