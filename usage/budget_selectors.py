"""Budget reads: which budgets an actor may see, and each one's spend and state."""

import datetime as dt

from django.db.models import Q, QuerySet
from django.utils import timezone

from board.models import Task
from config.actors import Actor
from config.api.errors import DomainError
from usage.budgets import WARN_PERCENT, Spent, budget_spent, budgets_spent, day_start
from usage.models import Budget

Scope = Budget.Scope


def budgets_visible_to(*, actor: Actor) -> QuerySet[Budget]:
    """Staff, people who work the board and orchestrating keys see every budget; an agent the ones that
    apply to it: its own agent and day budgets, the all-agents day budget, and the task and campaign
    budgets of the tasks it holds."""
    budgets = Budget.objects.select_related("agent", "task", "campaign")
    if actor.agent is None or actor.can_orchestrate:
        return budgets
    held = Task.objects.filter(assignee=actor.agent)
    return budgets.filter(
        Q(scope__in=[Scope.AGENT, Scope.DAY], agent=actor.agent)
        | Q(scope=Scope.DAY, agent__isnull=True)
        | Q(scope=Scope.TASK, task__in=held)
        | Q(scope=Scope.CAMPAIGN, campaign__in=held.filter(campaign__isnull=False).values("campaign_id"))
    )


def budget_get_for_actor(*, actor: Actor, budget_id: int) -> Budget:
    budget = budgets_visible_to(actor=actor).filter(pk=budget_id).first()
    if budget is None:
        raise DomainError(f"Budget {budget_id} not found.", code="not_found")
    return budget


def budget_state(budget: Budget, spent: Spent, *, now: dt.datetime | None = None) -> str:
    """``ok``, ``warning`` (at WARN_PERCENT) or ``exceeded`` (at 100 %), as the spend has it now."""
    percent = spent.percent_of(budget)
    if percent >= 100:
        return "exceeded"
    return "warning" if percent >= WARN_PERCENT else "ok"


def budget_status(budget: Budget, *, now: dt.datetime | None = None, spent: Spent | None = None) -> dict:
    """A budget with what it has spent: the API's output and the card panel's figures. ``spent``: from
    budgets_spent, when the caller lists several (else one aggregate here)."""
    now = now or timezone.now()
    spent = budget_spent(budget=budget, now=now) if spent is None else spent
    since = day_start(now)
    fresh = budget.scope != Scope.DAY
    return {
        "budget": budget,
        "spent_tokens": spent.tokens,
        "spent_usd": spent.usd,
        "percent": round(spent.percent_of(budget), 1),
        "state": budget_state(budget, spent, now=now),
        # A day budget's state from an earlier day is no state today.
        "warned_at": budget.warned_at if fresh or (budget.warned_at and budget.warned_at >= since) else None,
        "exceeded_at": budget.exceeded_at if fresh or (budget.exceeded_at and budget.exceeded_at >= since) else None,
    }


def budgets_status(*, budgets: list[Budget], now: dt.datetime | None = None) -> list[dict]:
    """budget_status of each budget, their spend read in a fixed number of queries (budgets_spent)."""
    now = now or timezone.now()
    spent = budgets_spent(budgets=budgets, now=now)
    return [budget_status(b, now=now, spent=spent[b.pk]) for b in budgets]


def budgets_of_task(*, task: Task) -> list[dict]:
    """The budgets a task's work counts against, with their spend: the task's own, its campaign's, its
    assignee's and the day's (the card panel)."""
    where = Q(scope=Scope.TASK, task=task) | Q(scope=Scope.DAY, agent__isnull=True)
    if task.campaign_id:
        where |= Q(scope=Scope.CAMPAIGN, campaign_id=task.campaign_id)
    if task.assignee_id:
        where |= Q(scope__in=[Scope.AGENT, Scope.DAY], agent_id=task.assignee_id)
    return budgets_status(budgets=list(Budget.objects.filter(where).select_related("agent")))
