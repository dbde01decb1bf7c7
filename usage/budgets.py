"""Budgets that stop spending (SPEC §9): warn at WARN_PERCENT, stop new tool use and new claims at 100 %.

- After an OTLP export's usage rows are stored (usage.services, same transaction), the budgets they
  count against are evaluated once each: the first crossing of WARN_PERCENT records ``budget.warning``,
  of 100 % ``budget.exceeded`` (ledger events: webhooks; the task's card is pushed for its banner).
  A conditional UPDATE (``warned_at IS NULL``) makes each happen once, however many exports race.
- Before a tool use (the hook's PreToolUse records the call; ledger/tool_use_gates.py asks
  ``budget_tool_use_verdict``) an exceeded budget puts the session in ``waiting_for_input`` with the
  question BUDGET_QUESTION (an Allow/Deny input request, as permission_requests.py has them); the
  hook waits for the answer and denies the tool use when nobody raised the budget in time.
- claim-next (board/claim_gates.py asks ``budget_claim_block``) hands no new task to an agent whose
  agent or day budget is exceeded, nor a task whose own or campaign budget is; a claim of that task by
  id is refused (409) with the reason naming the budget.
- Raising a limit above the spend (budget_update) clears the state, records ``budget.raised`` and
  answers Allow to every session waiting on a budget question: the work goes on where it stopped.

A day budget counts the current UTC day; its state from an earlier day counts as unset.
"""

import datetime as dt
import time
import uuid
from dataclasses import dataclass
from decimal import Decimal

from django.db import transaction
from django.db.models import DecimalField, Q, QuerySet, Sum, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from board.claim_gates import ClaimRefusal, claim_gate_register
from board.live import board_push_tasks
from board.models import Task
from board.services import require_board_editor
from config.actors import SYSTEM, Actor
from config.api.errors import DomainError
from config.side_effects import after_commit
from ledger.events import event_record
from ledger.tool_use_gates import tool_use_gate_register
from sessions_app.input_requests import session_answer_input
from sessions_app.live import session_push
from sessions_app.models import Agent, AgentSession, StreamEvent
from sessions_app.permission_requests import PERMISSION_CHOICES
from sessions_app.selectors import session_question
from sessions_app.services import append_system_event, session_transition
from usage.models import Budget, UsageRecord

WARN_PERCENT = 80
BUDGET_QUESTION = "budget exceeded: raise it or stop"
Scope = Budget.Scope


@dataclass(frozen=True)
class Spent:
    tokens: int
    usd: Decimal

    def percent_of(self, budget: Budget) -> float:
        """The larger share of its limits the spend has used (0-100+)."""
        shares = []
        if budget.limit_tokens:
            shares.append(100.0 * self.tokens / budget.limit_tokens)
        if budget.limit_usd:
            shares.append(float(100 * self.usd / budget.limit_usd))
        return max(shares, default=0.0)


def day_start(now: dt.datetime | None = None) -> dt.datetime:
    now = now or timezone.now()
    return now.astimezone(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def budget_spent(*, budget: Budget, now: dt.datetime | None = None) -> Spent:
    """What has been spent against the budget: one aggregate over its usage rows."""
    rows = UsageRecord.objects.all()
    if budget.scope == Scope.TASK:
        rows = rows.filter(task_id=budget.task_id)
    elif budget.scope == Scope.AGENT:
        rows = rows.filter(agent_id=budget.agent_id)
    elif budget.scope == Scope.CAMPAIGN:
        rows = rows.filter(task__campaign_id=budget.campaign_id)
    else:
        rows = rows.filter(occurred_at__gte=day_start(now))
        if budget.agent_id:
            rows = rows.filter(agent_id=budget.agent_id)
    return _spent(rows.aggregate(**_SUMS))


_MONEY = DecimalField(max_digits=24, decimal_places=8)
_SUMS = {
    "input": Coalesce(Sum("input_tokens"), 0),
    "output": Coalesce(Sum("output_tokens"), 0),
    "usd": Coalesce(Sum("cost_usd"), Value(0), output_field=_MONEY),
}
_NOTHING = Spent(tokens=0, usd=Decimal(0))


def _spent(totals: dict) -> Spent:
    return Spent(tokens=int(totals["input"] + totals["output"]), usd=Decimal(totals["usd"]))


def budgets_spent(*, budgets: list[Budget], now: dt.datetime | None = None) -> dict[int, Spent]:
    """What each budget has spent (as budget_spent), by budget id: one grouped aggregate per scope at
    most (five queries), however many budgets. A list must not run one aggregate per budget."""
    since = day_start(now)
    found: dict[tuple[str, int | None], Spent] = {}
    for scope, target, column, when in _GROUPED:
        ids = {getattr(b, target) for b in budgets if b.scope == scope} - {None}
        if ids:
            rows = UsageRecord.objects.filter(when(since), **{f"{column}__in": ids}).order_by().values(column)
            found.update({(scope, row[column]): _spent(row) for row in rows.annotate(**_SUMS)})
    if any(b.scope == Scope.DAY and b.agent_id is None for b in budgets):
        found[(Scope.DAY, None)] = _spent(UsageRecord.objects.filter(occurred_at__gte=since).aggregate(**_SUMS))
    targets = {scope: target for scope, target, _, _ in _GROUPED}
    return {b.pk: found.get((b.scope, getattr(b, targets[b.scope])), _NOTHING) for b in budgets}


# Per scope: the budget's target, the usage column it is grouped by, and which rows count (the day's).
_GROUPED = (
    (Scope.TASK, "task_id", "task_id", lambda since: Q()),
    (Scope.AGENT, "agent_id", "agent_id", lambda since: Q()),
    (Scope.CAMPAIGN, "campaign_id", "task__campaign_id", lambda since: Q()),
    (Scope.DAY, "agent_id", "agent_id", lambda since: Q(occurred_at__gte=since)),
)


def _applying(*, agent_id: int | None, task_ids: set[int], campaign_ids: set[int]) -> Q:
    """The budgets usage of this agent on these tasks (and their campaigns) counts against."""
    where = Q(scope=Scope.DAY, agent__isnull=True)
    if agent_id is not None:
        where |= Q(scope=Scope.AGENT, agent_id=agent_id) | Q(scope=Scope.DAY, agent_id=agent_id)
    if task_ids:
        where |= Q(scope=Scope.TASK, task_id__in=task_ids)
    if campaign_ids:
        where |= Q(scope=Scope.CAMPAIGN, campaign_id__in=campaign_ids)
    return where


def _stale(field: str, since: dt.datetime) -> Q:
    """The state ``field`` is unset: null, or (a day budget) set on an earlier day."""
    return Q(**{f"{field}__isnull": True}) | Q(scope=Scope.DAY, **{f"{field}__lt": since})


def _is_set(budget: Budget, field: str, since: dt.datetime) -> bool:
    value = getattr(budget, field)
    return value is not None and not (budget.scope == Scope.DAY and value < since)


def budgets_evaluate(*, agent_id: int, task_ids: set[int]) -> list[str]:
    """Record the warnings and exceedings the agent's new usage caused; the names of the events
    recorded. Call in the transaction that stored the usage: the events commit with it."""
    if not Budget.objects.exists():
        return []  # the usual case: one cheap query per export
    campaign_ids = set(
        Task.objects.filter(pk__in=task_ids, campaign__isnull=False).values_list("campaign_id", flat=True)
    )
    now = timezone.now()
    since = day_start(now)
    recorded = []
    applying = list(Budget.objects.filter(_applying(agent_id=agent_id, task_ids=task_ids, campaign_ids=campaign_ids)))
    spent_of = budgets_spent(budgets=applying, now=now)
    for budget in applying:
        spent = spent_of[budget.pk]
        percent = spent.percent_of(budget)
        for field, name, threshold in (
            ("warned_at", "budget.warning", WARN_PERCENT),
            ("exceeded_at", "budget.exceeded", 100),
        ):
            if percent < threshold or _is_set(budget, field, since):
                continue
            # Once, however many exports race: the UPDATE changes the row for one of them only.
            if Budget.objects.filter(_stale(field, since), pk=budget.pk).update(**{field: now, "updated_at": now}):
                if field == "exceeded_at":
                    _budget_became_exceeded()
                setattr(budget, field, now)
                _budget_event(name, budget, spent=spent, actor=SYSTEM)
                recorded.append(name)
    return recorded


def _budget_event(name: str, budget: Budget, *, spent: Spent | None, actor: Actor, **extra) -> None:
    payload = {**budget_describe(budget), **extra}
    if spent is not None:
        payload.update(spent_tokens=spent.tokens, spent_usd=str(spent.usd))
    event_record(name=name, subject_type="budget", subject_id=budget.pk, actor=actor.label, payload=payload)
    board_push_tasks(task_ids=_cards_of(budget))


# The cards a budget's banner shows on (usage/budget_pages.py), and so the cards pushed when its state
# changes: a task's and a campaign's budget on their open cards (claim-next leaves those alone once it is
# exceeded), an agent's and a day's on the cards of the work under way.
CARDS_OF_TASK = (Task.Status.BACKLOG, Task.Status.READY, Task.Status.IN_PROGRESS, Task.Status.BLOCKED)
CARDS_AT_WORK = (Task.Status.IN_PROGRESS,)
CARDS_PUSHED = 200  # a push re-renders each card: a budget over more cards leaves the rest to a refetch


def _cards_of(budget: Budget) -> list[int]:
    """The cards whose banner shows this budget's state (CARDS_OF_TASK, CARDS_AT_WORK)."""
    if budget.scope == Scope.TASK:
        return [budget.task_id]
    if budget.scope == Scope.CAMPAIGN:
        tasks = Task.objects.filter(status__in=CARDS_OF_TASK, campaign_id=budget.campaign_id)
    else:
        tasks = Task.objects.filter(status__in=CARDS_AT_WORK)
        if budget.agent_id:
            tasks = tasks.filter(assignee_id=budget.agent_id)
    return list(tasks.values_list("pk", flat=True)[:CARDS_PUSHED])


def budget_describe(budget: Budget) -> dict:
    """What events and the hook are told about a budget: ids only, and the limits as strings."""
    return {
        "budget": budget.pk,
        "scope": budget.scope,
        "task": budget.task_id,
        "agent": budget.agent.slug if budget.agent_id else None,
        "campaign": budget.campaign_id,
        "limit_tokens": budget.limit_tokens,
        "limit_usd": str(budget.limit_usd) if budget.limit_usd is not None else None,
    }


def budget_reason(budget: Budget) -> str:
    target = {
        Scope.TASK: f"task {budget.task_id}",
        Scope.AGENT: f"agent {budget.agent.slug if budget.agent_id else ''}",
        Scope.CAMPAIGN: f"campaign {budget.campaign_id}",
        Scope.DAY: f"today's budget of agent {budget.agent.slug}" if budget.agent_id else "today's budget",
    }[budget.scope]
    limits = " / ".join(
        part
        for part in (
            f"{budget.limit_tokens} tokens" if budget.limit_tokens else "",
            f"${budget.limit_usd}" if budget.limit_usd else "",
        )
        if part
    )
    return f"Budget exceeded ({target}: {limits}): raise it in Switchyard or stop."


# --- who is stopped ----------------------------------------------------------------------------------------
# "No budget is exceeded", as this process last read it, is believed for NONE_EXCEEDED_MEMO_SECONDS.
# Asked on every claim and every tool use, the query was a third of a claim's time in the server under
# 32 agents (bench/HISTORY.md, "Against the commit before issue 14"). A budget this process marks exceeded
# forgets the memo at once (and again after commit, so a reader between the write and the commit cannot
# keep a stale "none"); one marked in another process stops claims and tool uses here within the memo's
# second. Only "none" is memoised: any exceeded budget is read afresh, so a raise is seen at once.
NONE_EXCEEDED_MEMO_SECONDS = 1.0
_none_exceeded_until = [0.0]  # monotonic time until which "none exceeded" holds


def budgets_exceeded_forget() -> None:
    """Forget the memoised "none exceeded": call wherever a budget becomes exceeded."""
    _none_exceeded_until[0] = 0.0


def _budget_became_exceeded() -> None:
    budgets_exceeded_forget()
    after_commit(budgets_exceeded_forget)


def budgets_exceeded(now: dt.datetime | None = None) -> list[Budget]:
    """Every budget exceeded now (the partial index budget_exceeded: usually none)."""
    if _none_exceeded_until[0] > time.monotonic():
        return []
    # The bare EXISTS on the partial index costs a third of the full query's compile-and-run (0.6
    # against 2.0 ms), and usually answers "none".
    started = time.monotonic()
    if not Budget.objects.filter(exceeded_at__isnull=False).exists():
        _none_exceeded_until[0] = started + NONE_EXCEEDED_MEMO_SECONDS
        return []
    since = day_start(now)
    live = Q(exceeded_at__isnull=False) & ~Q(scope=Scope.DAY, exceeded_at__lt=since)
    return list(Budget.objects.filter(live).select_related("agent"))


def budget_stopping(*, agent_id: int, task_id: int | None, exceeded: list[Budget] | None = None) -> Budget | None:
    """The exceeded budget that stops this agent working on this task, if any: one query when none is
    exceeded, two when some are, three when a campaign's is. ``exceeded``: budgets_exceeded(), when the caller has it."""
    exceeded = budgets_exceeded() if exceeded is None else exceeded
    if not exceeded:
        return None
    campaign_id = None
    if task_id is not None and any(b.scope == Scope.CAMPAIGN for b in exceeded):
        campaign_id = Task.objects.filter(pk=task_id).values_list("campaign_id", flat=True).first()
    for budget in sorted(exceeded, key=lambda b: list(Scope.values).index(b.scope)):
        if (
            (budget.scope == Scope.TASK and task_id is not None and budget.task_id == task_id)
            or (budget.scope == Scope.AGENT and budget.agent_id == agent_id)
            or (budget.scope == Scope.CAMPAIGN and campaign_id is not None and budget.campaign_id == campaign_id)
            or (budget.scope == Scope.DAY and budget.agent_id in (None, agent_id))
        ):
            return budget
    return None


def budget_claim_block(*, agent: Agent) -> ClaimRefusal | None:
    """What claim-next (and a claim by id) must leave alone for this agent because of exceeded budgets,
    each with the reason naming the budget (None: nothing)."""
    exceeded = budgets_exceeded()
    if not exceeded:
        return None
    stopping = [b for b in exceeded if b.scope in (Scope.AGENT, Scope.DAY) and b.agent_id in (None, agent.pk)]
    campaigns = {b.campaign_id: budget_reason(b) for b in exceeded if b.scope == Scope.CAMPAIGN}
    tasks = {b.task_id: budget_reason(b) for b in exceeded if b.scope == Scope.TASK}
    return ClaimRefusal(
        reason=budget_reason(stopping[0]) if stopping else "",
        campaign_ids=frozenset(campaigns),
        task_ids=frozenset(tasks),
        campaign_reasons=campaigns,
        task_reasons=tasks,
    )


# --- the hook's question ------------------------------------------------------------------------------------
def budget_tool_use_verdict(*, session: AgentSession, tool_name: str) -> dict | None:
    """Before a tool use: None when no exceeded budget applies (one query). Else the session waits for
    input with BUDGET_QUESTION (one question, however many tool uses ask while it waits) and the
    answer names the question the hook waits on: ``{"exceeded": True, "request_id", "reason", ...}``."""
    exceeded = budgets_exceeded()
    if not exceeded:
        return None
    task_id = session.task_id
    if task_id is None and session.parent_id:
        # A subagent's session works on its main session's task.
        task_id = AgentSession.objects.filter(pk=session.parent_id).values_list("task_id", flat=True).first()
    budget = budget_stopping(agent_id=session.agent_id, task_id=task_id, exceeded=exceeded)
    if budget is None:
        return None
    try:
        request_id = _budget_question_open(session=session, tool_name=tool_name, budget=budget).client_id
    except DomainError:
        request_id = ""  # the session cannot wait (it ended): nobody can raise it for this call; deny
    return {
        "exceeded": True,
        "request_id": request_id,
        "question": BUDGET_QUESTION,
        "reason": budget_reason(budget),
        **budget_describe(budget),
    }


@transaction.atomic
def _budget_question_open(*, session: AgentSession, tool_name: str, budget: Budget) -> StreamEvent:
    session = AgentSession.objects.select_for_update().get(pk=session.pk)
    asked = session_question(session=session)
    if (
        session.status == AgentSession.Status.WAITING_FOR_INPUT
        and asked is not None
        and isinstance(asked.payload, dict)
        and asked.payload.get("budget") is not None
    ):
        return asked  # already waiting on a budget: every tool use waits for the same answer
    payload = {
        "question": BUDGET_QUESTION,
        "choices": list(PERMISSION_CHOICES),  # Allow (once) / Deny on the session page and the card
        "tool_name": tool_name[:200],
        "reason": budget_reason(budget),
        **budget_describe(budget),
    }
    event = append_system_event(session=session, type=StreamEvent.Type.INPUT_REQUEST, payload=payload)
    # The hook polls the question by a client id, as it does for the PermissionRequests it records.
    event.client_id = f"budget-{uuid.uuid4().hex}"
    event.save(update_fields=["client_id"])
    session_push(session_id=session.pk, seqs=(event.seq, event.seq))
    session_transition(
        actor=SYSTEM, session=session, status=AgentSession.Status.WAITING_FOR_INPUT, reason=BUDGET_QUESTION
    )
    return event


def _sessions_waiting_on_budgets() -> QuerySet[AgentSession]:
    return AgentSession.objects.filter(status=AgentSession.Status.WAITING_FOR_INPUT)


def budget_waiting_release(*, actor: Actor) -> int:
    """Answer Allow to every session waiting on a budget that no longer stops it; how many."""
    released = 0
    for session in _sessions_waiting_on_budgets().select_related("agent"):
        asked = session_question(session=session)
        if asked is None or not isinstance(asked.payload, dict) or asked.payload.get("budget") is None:
            continue
        if budget_stopping(agent_id=session.agent_id, task_id=session.task_id) is not None:
            continue
        try:
            session_answer_input(actor=actor, session=session, answer="Budget raised: go on.", decision="allow")
        except DomainError:
            continue  # answered meanwhile (a person, or another raise)
        released += 1
    return released


# --- writes from people -------------------------------------------------------------------------------------
def require_budget_editor(*, actor: Actor) -> None:
    """Budgets are set by people who work the board (product owners raise them from the card), staff,
    or an orchestrating key; an agent may read the budgets that apply to it, never change them."""
    require_board_editor(actor=actor, what="set budgets")


@transaction.atomic
def budget_create(*, actor: Actor, scope: str, target=None, agent: Agent | None = None, **limits) -> Budget:
    require_budget_editor(actor=actor)
    fields = {"scope": scope, "limit_tokens": limits.get("limit_tokens"), "limit_usd": limits.get("limit_usd")}
    if scope == Scope.TASK:
        fields["task"] = target
    elif scope == Scope.CAMPAIGN:
        fields["campaign"] = target
    else:
        fields["agent"] = agent
    _check_limits(fields["limit_tokens"], fields["limit_usd"])
    if Budget.objects.filter(**{k: v for k, v in fields.items() if not k.startswith("limit")}).exists():
        raise DomainError("That budget exists already: change its limits instead.", code="conflict")
    budget = Budget.objects.create(**fields)
    _budget_state_refresh(actor=actor, budget=budget, name="budget.created")
    return budget


@transaction.atomic
def budget_update(*, actor: Actor, budget: Budget, **limits) -> Budget:
    """Change the limits (raise them, usually). Locks the row; a limit above the spend clears the
    exceeded (and warned) state and lets the waiting sessions go on."""
    require_budget_editor(actor=actor)
    budget = Budget.objects.select_for_update(of=("self",)).select_related("agent").get(pk=budget.pk)
    for name in ("limit_tokens", "limit_usd"):
        if name in limits:
            setattr(budget, name, limits[name])
    if budget.limit_tokens is None and budget.limit_usd is None:
        raise DomainError("That would leave the budget limiting nothing: delete it instead.", code="conflict")
    _check_limits(budget.limit_tokens, budget.limit_usd)
    budget.save(update_fields=["limit_tokens", "limit_usd", "updated_at"])
    _budget_state_refresh(actor=actor, budget=budget, name="budget.changed")
    return budget


@transaction.atomic
def budget_delete(*, actor: Actor, budget: Budget) -> None:
    require_budget_editor(actor=actor)
    budget = Budget.objects.select_for_update(of=("self",)).select_related("agent").get(pk=budget.pk)
    _budget_event("budget.deleted", budget, spent=None, actor=actor)
    budget.delete()
    budget_waiting_release(actor=actor)


def _check_limits(tokens, usd) -> None:
    if tokens is None and usd is None:
        raise DomainError("Give limit_tokens, limit_usd or both: a budget limits something.")
    if (tokens is not None and tokens <= 0) or (usd is not None and usd <= 0):
        raise DomainError("Limits are above zero; delete the budget to remove it.")


def _budget_state_refresh(*, actor: Actor, budget: Budget, name: str) -> None:
    """After a limit changed: the state the spend has now. Below 100 % again → ``budget.raised`` and the
    waiting sessions answered; crossing a threshold → the usual event."""
    now = timezone.now()
    since = day_start(now)
    spent = budget_spent(budget=budget, now=now)
    percent = spent.percent_of(budget)
    was_exceeded = _is_set(budget, "exceeded_at", since)
    budget.exceeded_at = (budget.exceeded_at if was_exceeded else now) if percent >= 100 else None
    budget.warned_at = (
        (budget.warned_at if _is_set(budget, "warned_at", since) else now) if percent >= WARN_PERCENT else None
    )
    budget.save(update_fields=["warned_at", "exceeded_at", "updated_at"])
    if budget.exceeded_at is not None:
        _budget_became_exceeded()
    _budget_event(name, budget, spent=spent, actor=actor)
    if was_exceeded and budget.exceeded_at is None:
        _budget_event("budget.raised", budget, spent=spent, actor=actor)
        budget_waiting_release(actor=actor)
    elif not was_exceeded and budget.exceeded_at is not None:
        _budget_event("budget.exceeded", budget, spent=spent, actor=actor)


def budget_gates_register() -> None:
    """Budgets as board's claim gate and the ledger's tool-use gate (called from UsageConfig.ready)."""
    claim_gate_register(name="budget", gate=budget_claim_block)
    tool_use_gate_register(name="budget", gate=budget_tool_use_verdict)
