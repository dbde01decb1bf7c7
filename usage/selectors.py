"""Usage reads: rollups per agent, task, campaign or day, one aggregate query each."""

import datetime as dt

from django.db.models import Count, DecimalField, F, Q, QuerySet, Sum, Value
from django.db.models.functions import Coalesce, TruncDate

from config.actors import Actor
from usage.models import TOKEN_FIELDS, UsageRecord

GROUPS = ("agent", "task", "campaign", "day")
# What each group is keyed by, and the label shown beside the key.
_GROUP_KEY = {"agent": "agent_id", "task": "task_id", "campaign": "task__campaign_id", "day": "day"}
_GROUP_LABEL = {"agent": "agent__slug", "task": "task__title", "campaign": "task__campaign__name"}


def usage_visible_to(*, actor: Actor) -> QuerySet[UsageRecord]:
    """Staff and orchestrating keys see every agent's usage; an agent its own (as sessions)."""
    queryset = UsageRecord.objects.all()
    if actor.is_staff or actor.can_orchestrate:
        return queryset
    return queryset.filter(agent=actor.agent)


def usage_rollup(
    *,
    actor: Actor,
    group_by: str,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    agent: str | None = None,
    task: int | None = None,
    campaign: int | None = None,
    session: str | None = None,
) -> list[dict]:
    """Tokens, cost and counts per group, largest cost first (days: oldest first). ``until`` is
    exclusive. Rows with no task (or no campaign) form a group keyed None."""
    queryset = usage_visible_to(actor=actor)
    filters = Q()
    if since is not None:
        filters &= Q(occurred_at__gte=since)
    if until is not None:
        filters &= Q(occurred_at__lt=until)
    if agent:
        filters &= Q(agent__slug=agent)
    if task is not None:
        filters &= Q(task_id=task)
    if campaign is not None:
        filters &= Q(task__campaign_id=campaign)
    if session:
        filters &= Q(session_id=session)
    queryset = queryset.filter(filters)
    if group_by == "day":
        queryset = queryset.annotate(day=TruncDate("occurred_at"))
    names = [_GROUP_KEY[group_by]] + ([_GROUP_LABEL[group_by]] if group_by in _GROUP_LABEL else [])
    rows = queryset.values(*names).annotate(**_totals()).order_by()
    key = _GROUP_KEY[group_by]
    order = [F("day").asc()] if group_by == "day" else [F("cost_usd").desc(), F(key).asc(nulls_first=True)]
    return [
        {
            # Agent slug, task or campaign id, or YYYY-MM-DD; None for the rows with no task or campaign.
            "key": row[_GROUP_LABEL["agent"]] if group_by == "agent" else _text(row[key]),
            "label": row.get(_GROUP_LABEL.get(group_by, ""), None),
            **{name: row[name] for name in (*TOKEN_FIELDS, "cost_usd", "requests", "tool_calls")},
        }
        for row in rows.order_by(*order)
    ]


def _totals() -> dict:
    totals = {name: Coalesce(Sum(name), 0) for name in TOKEN_FIELDS}
    money = DecimalField(max_digits=24, decimal_places=8)
    totals["cost_usd"] = Coalesce(Sum("cost_usd"), Value(0), output_field=money)
    totals["requests"] = Count("id", filter=Q(tool_name=""))
    totals["tool_calls"] = Count("id", filter=~Q(tool_name=""))
    return totals


def _text(value) -> str | None:
    if value is None:
        return None
    return value.isoformat() if isinstance(value, dt.date) else str(value)
