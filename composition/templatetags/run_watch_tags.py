"""``{% task_run_watch task %}``: the run watch on a task's panel (composition/run_watch/), and its
number formats."""

from decimal import Decimal
from functools import lru_cache

from django import template

from board.templatetags.board_tags import markdown_safe
from composition.run_watch.selectors import run_watch
from composition.run_watch.selectors import task_had_runs as _task_had_runs

register = template.Library()


@register.inclusion_tag("run_watch/_run_watch_box.html")
def task_run_watch(task):
    return {"watch": run_watch(task=task)}


@register.simple_tag
def task_had_runs(task) -> bool:
    return _task_had_runs(task=task)


@register.filter
@lru_cache(maxsize=4096)
def said_markdown(text: str) -> str:
    """The agent's words as sanitised markdown (the card's filter), kept: a watched panel is redrawn
    every 2 s with mostly the same words, and making markdown's parser is the slow part of a redraw."""
    return markdown_safe(text)


@register.filter
def token_count(value) -> str:
    """``1,234 tokens``; ``—`` when unknown."""
    if value is None:
        return "—"
    value = int(value)
    return f"{value:,} token{'s' if value != 1 else ''}"


@register.filter
def usd(value) -> str:
    """``$0.0043``, ``$1.27``; ``—`` when unknown (Codex and the demo say no cost)."""
    if value is None:
        return "—"
    amount = Decimal(value)
    return f"${amount:.2f}" if amount >= 1 else f"${amount:.4f}"


@register.filter
def seconds_short(seconds) -> str:
    if seconds is None:
        return "—"
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m {seconds % 60:02d}s"
    return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m"
