"""The run boxes and the "run with" field, included by board and session templates.

Inclusion tags so that those pages' views need not know about runs: the box reads what it shows
itself (two queries), and the runner views render the same partial when it changes.
"""

from datetime import timedelta

from django import template
from django.utils import timezone

from config.pages import BOARD, user_may
from runners import page_selectors
from runners.models import Run

register = template.Library()


def _form_context(context) -> dict:
    request = context.get("request")
    user = getattr(request, "user", None) or context.get("user")
    return {
        "csrf_token": context.get("csrf_token"),
        "may_run": bool(user and user_may(user, BOARD)),  # as runners/pages/views.py
        "nav_is_engineer": context.get("nav_is_engineer"),  # session pages are for engineers
        "request": request,
    }


@register.inclusion_tag("runners/_task_run.html", takes_context=True)
def task_run_box(context, task):
    return {"box": page_selectors.task_run_box(task=task), **_form_context(context)}


@register.inclusion_tag("runners/_session_run.html", takes_context=True)
def session_run_box(context, session):
    return {"run": page_selectors.session_run(session_id=session.pk), "session": session, **_form_context(context)}


@register.inclusion_tag("runners/_run_with.html", takes_context=True)
def run_with_field(context, suffix="", selected=""):
    """The "run with" select of a Start job form; ``suffix`` keeps ids unique with several forms,
    which share one read of the providers per page; ``selected``: the provider a refused form had."""
    choices = context.render_context.get("run_with_choices")
    if choices is None:
        choices = context.render_context["run_with_choices"] = page_selectors.provider_choices()
    field_id = f"run-with-{suffix}" if suffix != "" else "run-with"
    return {"choices": choices, "field_id": field_id, "selected": selected}


@register.filter
def error_tail(text: str, lines: int = 6) -> str:
    """A run's error as a box shows it: the first line (the exit code) and the last ``lines`` lines,
    the end of the log being what explains a failure; each line cut at 300 characters."""
    rows = [row if len(row) <= 300 else row[:299] + "…" for row in (text or "").splitlines()]
    if len(rows) > lines + 1:
        rows = [rows[0], "…", *rows[-lines:]]
    return "\n".join(rows)


@register.filter
def run_duration(run: Run) -> str:
    """How long it ran (or has been running): ``42s``, ``3m 05s``, ``1h 02m``; ``—`` before it starts."""
    if run.started_at is None:
        return "—"
    end = run.ended_at or timezone.now()
    seconds = max(0, int((end - run.started_at) / timedelta(seconds=1)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m {seconds % 60:02d}s"
    return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m"
