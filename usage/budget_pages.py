"""Budgets on the board (SPEC §9): the card's banner (board's card extras) and the card panel's budget
box, where a product owner sets the task's budget or raises an exceeded one and the work goes on.

Thin: budget_selectors read, usage/budgets.py writes. A refused or invalid form is shown in the box
with status 200 under htmx (which swaps only 2xx answers), as the panel's repository box does.
"""

from decimal import Decimal, InvalidOperation

from django.contrib import messages
from django.db.models import Case, IntegerField, OuterRef, Q, Subquery, Value, When
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from board.card_extras import CardExtra, card_extra_register
from board.models import Task
from config.actors import Actor
from config.api.errors import DomainError
from config.pages import BOARD, page_for, user_may
from usage.budget_selectors import budgets_of_task
from usage.budgets import CARDS_AT_WORK, CARDS_OF_TASK, budget_create, budget_update, day_start
from usage.models import Budget

Scope = Budget.Scope


# --- the card's banner --------------------------------------------------------------------------------------
# Each level a card's work counts against, as (annotation, its budgets, the card statuses it shows on):
# the task's own and its campaign's budget on open cards, the assignee's and the day's on the card of
# the work under way (the cards usage/budgets.py pushes when a budget's state changes: CARDS_*).
_LEVELS = (
    ("budget_task", lambda: Q(scope=Scope.TASK, task_id=OuterRef("pk")), CARDS_OF_TASK),
    ("budget_campaign", lambda: Q(scope=Scope.CAMPAIGN, campaign_id=OuterRef("campaign_id")), CARDS_OF_TASK),
    ("budget_agent", lambda: Q(scope=Scope.AGENT, agent_id=OuterRef("assignee_id")), CARDS_AT_WORK),
    ("budget_day", lambda: Q(scope=Scope.DAY, agent__isnull=True), CARDS_AT_WORK),
    ("budget_agent_day", lambda: Q(scope=Scope.DAY, agent_id=OuterRef("assignee_id")), CARDS_AT_WORK),
)


def card_budget_annotations() -> dict:
    """Per level (_LEVELS): 2 when that budget is exceeded, 1 at its warning, None otherwise. Each an index
    lookup on one of the budget table's unique constraints; a day budget's state from an earlier day is
    none today."""
    since = day_start()
    warned = Q(warned_at__isnull=False) & ~Q(scope=Scope.DAY, warned_at__lt=since)
    exceeded = Q(exceeded_at__isnull=False) & ~Q(scope=Scope.DAY, exceeded_at__lt=since)
    severity = Case(When(exceeded, then=Value(2)), default=Value(1), output_field=IntegerField())
    annotations = {}
    for name, where, statuses in _LEVELS:
        alert = Budget.objects.filter(where(), warned).annotate(severity=severity).values("severity")[:1]
        annotations[name] = Case(
            When(status__in=statuses, then=Subquery(alert)), default=Value(None), output_field=IntegerField()
        )
    return annotations


def card_budget_lines(task: Task) -> list[dict]:
    """The banner's lines, worst first: ``{"exceeded": bool, "level": "task"|"campaign"|..., "name": ...}``;
    ``name`` is agent- or person-written text (a campaign's name, an agent's slug): the template escapes it."""
    lines = []
    for name, _, _ in _LEVELS:
        alert = getattr(task, name, None)
        if alert:
            lines.append(
                {"exceeded": alert == 2, "level": name.removeprefix("budget_"), "name": _level_name(task, name)}
            )
    return sorted(lines, key=lambda line: not line["exceeded"])


def _level_name(task: Task, level: str) -> str:
    if level == "budget_campaign":
        return task.campaign.name if task.campaign_id else ""
    if level in ("budget_agent", "budget_agent_day"):
        return task.assignee.slug if task.assignee_id else ""
    return ""


def card_budget_register() -> None:
    card_extra_register(
        extra=CardExtra(
            name="budget", annotations=card_budget_annotations, template="usage/_card_budget.html", key=day_start
        )
    )


# --- the panel's box ----------------------------------------------------------------------------------------
def task_budget_box(*, task: Task, error: str = "", saved: str = "") -> dict:
    statuses = budgets_of_task(task=task)
    own = next((s for s in statuses if s["budget"].scope == Scope.TASK), None)
    worst = max((s for s in statuses if s["state"] != "ok"), key=lambda s: s["percent"], default=None)
    return {"task": task, "budgets": statuses, "own": own, "alert": worst, "error": error, "saved": saved}


def _limit(raw: str, *, kind: type, name: str):
    """A limit from the form: empty is none; anything else must be a number above zero."""
    raw = (raw or "").strip().replace(",", "").removeprefix("$")
    if not raw:
        return None
    try:
        value = kind(raw)
    except (ValueError, InvalidOperation):
        raise DomainError(f"{name} must be a number above zero, or empty for none.") from None
    if value <= 0 or (kind is int and value > 2**62) or (kind is Decimal and value >= Decimal("1e10")):
        raise DomainError(f"{name} must be a number above zero (and below ten billion), or empty for none.")
    return value.quantize(Decimal("0.0001")) if kind is Decimal else value


@require_POST
@page_for(BOARD)
def task_budget_view(request, task_id: int):
    """Set the task's budget, or change (raise) one of the budgets its work counts against."""
    task = Task.objects.select_related("campaign", "assignee").filter(pk=task_id).first()
    if task is None:
        raise Http404(f"Task {task_id} not found.")
    actor = Actor(user=request.user)
    error = saved = ""
    try:
        limits = {
            "limit_tokens": _limit(request.POST.get("limit_tokens", ""), kind=int, name="The token limit"),
            "limit_usd": _limit(request.POST.get("limit_usd", ""), kind=Decimal, name="The dollar limit"),
        }
        budget = _budget_named(task, request.POST.get("budget", ""))
        if budget is None:
            budget_create(actor=actor, scope=Scope.TASK, target=task, **limits)
            saved = "Budget set."
        else:
            budget = budget_update(actor=actor, budget=budget, **limits)
            saved = "Budget raised: the work goes on." if budget.exceeded_at is None else "Budget changed."
    except DomainError as exc:
        error = exc.message
    if not request.htmx:
        (messages.error if error else messages.success)(request, error or saved)
        return redirect("board:task", task_id=task.pk)
    box = task_budget_box(task=task, error=error, saved=saved)
    return render(request, "usage/_task_budget.html", {"box": box, "may_edit": True})


def _budget_named(task: Task, value: str) -> Budget | None:
    """The budget a form changes (one of the task's: budgets_of_task), or None: the task's new budget."""
    value = value.strip()
    if not value:
        return None
    if not value.isascii() or not value.isdigit() or len(value) > 18:
        raise DomainError("Choose one of the task's budgets.")
    budget = next((s["budget"] for s in budgets_of_task(task=task) if s["budget"].pk == int(value)), None)
    if budget is None:
        raise DomainError("That budget no longer applies to this task; reload the panel.")
    return budget


def may_edit_budgets(user) -> bool:
    return bool(user and user_may(user, BOARD))
