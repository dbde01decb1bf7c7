"""Usage reads for the pages of other apps (cards, session page, agents page, campaigns, admin).

Those apps sit below usage in the layers and may not import it; their templates load
``usage_pages`` tags, which call these, and the board's cards get their figures through
``board/card_extras.py`` (registered in ``usage/apps.py``). Each read is one aggregate query.
"""

import datetime as dt
from dataclasses import dataclass, field
from decimal import Decimal

from django.db.models import Count, DecimalField, F, OuterRef, Q, Subquery, Sum, Value
from django.db.models.functions import Coalesce, TruncDate
from django.utils import timezone

from usage.models import TOKEN_FIELDS, UsageRecord

CHART_DAYS = 30
MONEY = DecimalField(max_digits=24, decimal_places=8)


def rollup_totals() -> dict:
    """The sums every usage figure on the pages is made of (as the rollup API's)."""
    totals = {name: Coalesce(Sum(name), 0) for name in TOKEN_FIELDS}
    totals["cost_usd"] = Coalesce(Sum("cost_usd"), Value(0), output_field=MONEY)
    totals["requests"] = Count("id", filter=Q(tool_name=""))
    totals["tool_calls"] = Count("id", filter=~Q(tool_name=""))
    return totals


@dataclass
class Totals:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0
    cost_usd: Decimal = Decimal(0)
    requests: int = 0
    tool_calls: int = 0

    @property
    def tokens(self) -> int:
        """Tokens in and out; cache reads and writes are counted apart (and are in the cost)."""
        return self.input_tokens + self.output_tokens

    def add(self, row: dict) -> None:
        for name in (*TOKEN_FIELDS, "cost_usd", "requests", "tool_calls"):
            setattr(self, name, getattr(self, name) + (row.get(name) or 0))


def card_usage_annotations() -> dict:
    """A card's tokens (in and out) and cost: two subqueries in the board's query, each an index
    range on ``usage_task_time``; None on a task with no usage, so the card shows no badge."""
    rows = UsageRecord.objects.filter(task=OuterRef("pk")).order_by().values("task")
    tokens = rows.annotate(n=Sum(F("input_tokens") + F("output_tokens"))).values("n")[:1]
    cost = rows.annotate(c=Coalesce(Sum("cost_usd"), Value(0), output_field=MONEY)).values("c")[:1]
    return {"usage_tokens": Subquery(tokens), "usage_cost": Subquery(cost, output_field=MONEY)}


@dataclass
class SessionUsage:
    total: Totals = field(default_factory=Totals)
    by_model: list[tuple[str, Totals]] = field(default_factory=list)
    # The session's own usage first, then each subagent's (child sessions and theirs): (id, totals).
    by_session: list[tuple[str, Totals]] = field(default_factory=list)


def session_usage(*, session_id: str) -> SessionUsage:
    """A session's usage with its subagents' included, per model and per session: one query."""
    tree = Q(session_id=session_id) | Q(session__parent_id=session_id) | Q(session__parent__parent_id=session_id)
    rows = UsageRecord.objects.filter(tree).values("session_id", "model").annotate(**rollup_totals()).order_by()
    result = SessionUsage()
    models: dict[str, Totals] = {}
    sessions: dict[str, Totals] = {session_id: Totals()}
    for row in rows:
        result.total.add(row)
        models.setdefault(row["model"], Totals()).add(row)
        sessions.setdefault(row["session_id"], Totals()).add(row)
    result.by_model = sorted(models.items(), key=lambda item: (-item[1].cost_usd, item[0]))
    own = sessions.pop(session_id)
    result.by_session = [(session_id, own), *sorted(sessions.items(), key=lambda item: item[0])]
    return result


def chart_days(*, today: dt.date | None = None) -> list[dt.date]:
    today = today or timezone.localdate()
    return [today - dt.timedelta(days=CHART_DAYS - 1 - i) for i in range(CHART_DAYS)]


def agents_daily_usage(*, days: list[dt.date]) -> dict[int, dict[dt.date, Totals]]:
    """Every agent's usage per day over ``days`` (the server's time zone): one query."""
    start = timezone.make_aware(dt.datetime.combine(days[0], dt.time.min))
    rows = (
        UsageRecord.objects.filter(occurred_at__gte=start)
        .annotate(day=TruncDate("occurred_at"))
        .values("agent_id", "day")
        .annotate(**rollup_totals())
        .order_by()
    )
    result: dict[int, dict[dt.date, Totals]] = {}
    for row in rows:
        result.setdefault(row["agent_id"], {}).setdefault(row["day"], Totals()).add(row)
    return result


def campaigns_usage(*, campaign_ids: list[int]) -> dict[int, Totals]:
    """What each campaign's tasks spent so far: one query."""
    rows = (
        UsageRecord.objects.filter(task__campaign_id__in=campaign_ids)
        .values("task__campaign_id")
        .annotate(**rollup_totals())
        .order_by()
    )
    result: dict[int, Totals] = {}
    for row in rows:
        result.setdefault(row["task__campaign_id"], Totals()).add(row)
    return result


def usage_totals(*, session_id: str | None = None, task_id: int | None = None, agent_id: int | None = None) -> Totals:
    """One session's (with its subagents), task's or agent's usage in all: the admin's change pages."""
    if session_id is not None:
        where = Q(session_id=session_id) | Q(session__parent_id=session_id) | Q(session__parent__parent_id=session_id)
    elif task_id is not None:
        where = Q(task_id=task_id)
    else:
        where = Q(agent_id=agent_id)
    totals = Totals()
    totals.add(UsageRecord.objects.filter(where).aggregate(**rollup_totals()))
    return totals


def usage_filtered_summary(*, queryset) -> dict:
    """Totals of an admin list's filtered rows, and per model: two queries."""
    total = Totals()
    total.add(queryset.order_by().aggregate(**rollup_totals()))
    by_model = []
    for row in queryset.order_by().values("model").annotate(**rollup_totals()).order_by("-cost_usd", "model")[:20]:
        totals = Totals()
        totals.add(row)
        by_model.append((row["model"], totals))
    return {"total": total, "by_model": by_model}
