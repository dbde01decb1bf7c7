"""Diff and plan events as people read them on the session page: a diff highlighted as one, a plan
as a checklist, instead of their JSON.

What agents send varies: a diff event carries its unified diff text (``diff``, ``patch``) or, as the
demo agent's, a commit and its ``git diff --stat`` (``commit``, ``stat``); a plan event carries a
list of steps (``plan``, ``todos``, ``steps``, ``items``: strings, or objects with ``content`` /
``text`` / ``step`` and ``status`` or ``completed``), or one task of Claude Code's task hooks
(``task_subject`` and ``status``). Everything in them is the agent's: Pygments escapes the diff, and
the checklist's text is escaped by the template.
"""

from __future__ import annotations

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import DiffLexer

DIFF_MAX = 200_000  # characters of a diff shown on the page; the rest is cut with a note
DIFF_KEYS = ("diff", "patch", "unified_diff")
STEP_LIST_KEYS = ("plan", "todos", "steps", "items")
STEP_TEXT_KEYS = ("content", "text", "step", "title", "subject", "task_subject", "activeForm")
DONE = frozenset({"completed", "complete", "done", "finished"})
DOING = frozenset({"in_progress", "active", "running", "started"})
_FORMATTER = HtmlFormatter(nowrap=True, classprefix="hl-")


def diff_text(payload: object) -> str:
    """The unified diff a diff event carries, or "" (then it may carry a stat: ``diff_stat``)."""
    if not isinstance(payload, dict):
        return ""
    for key in DIFF_KEYS:
        value = payload.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return ""


def diff_html(text: str) -> str:
    """The diff highlighted by Pygments' diff lexer (it escapes every character it is given)."""
    cut = len(text) > DIFF_MAX
    html = highlight(text[:DIFF_MAX], DiffLexer(), _FORMATTER)
    return html + (f'<span class="muted">… {len(text) - DIFF_MAX} more characters not shown</span>' if cut else "")


def _status(entry: dict) -> str:
    if entry.get("completed") is True or entry.get("done") is True:
        return "completed"
    status = str(entry.get("status") or entry.get("state") or "").lower()
    if status in DONE:
        return "completed"
    return "in_progress" if status in DOING else "pending"


def _step(entry: object) -> tuple[str, str] | None:
    if isinstance(entry, str):
        return (entry, "pending") if entry.strip() else None
    if isinstance(entry, dict):
        for key in STEP_TEXT_KEYS:
            value = entry.get(key)
            if isinstance(value, str) and value.strip():
                return value, _status(entry)
    return None


def plan_steps(payload: object) -> list[tuple[str, str]]:
    """(text, status) per step of a plan event, status ``pending``, ``in_progress`` or ``completed``;
    [] when it holds no steps this reads (the page then shows its JSON as before)."""
    if not isinstance(payload, dict):
        return []
    for key in STEP_LIST_KEYS:
        value = payload.get(key)
        if isinstance(value, list):
            return [step for step in map(_step, value) if step is not None]
    single = _step(payload) if isinstance(payload.get("task_subject"), str) else None
    return [single] if single else []
