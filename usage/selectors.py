"""Usage reads: rollups per agent, task, campaign or day, two aggregate queries each (the usage rows,
and the tool calls the hook recorded in the ledger)."""

import datetime as dt
from decimal import Decimal

from django.db.models import Count, DecimalField, Q, QuerySet, Sum, Value
from django.db.models.functions import Coalesce, TruncDate

from config.actors import Actor
from ledger.models import ToolInvocation
from usage.models import TOKEN_FIELDS, UsageRecord
from usage.tool_spans import CLIENT_ID_PREFIX

GROUPS = ("agent", "task", "campaign", "day")
# What each group is keyed by, and the label shown beside the key.
_GROUP_KEY = {"agent": "agent_id", "task": "task_id", "campaign": "task__campaign_id", "day": "day"}
_GROUP_LABEL = {"agent": "agent__slug", "task": "task__title", "campaign": "task__campaign__name"}
# The same for a tool call of the ledger, whose task is its session's.
_CALL_KEY = {"agent": "agent_id", "task": "session__task_id", "campaign": "session__task__campaign_id", "day": "day"}
_CALL_LABEL = {"agent": "agent__slug", "task": "session__task__title", "campaign": "session__task__campaign__name"}


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
    exclusive. Rows with no task (or no campaign) form a group keyed None.

    ``tool_calls`` counts the calls of the tool-call ledger (what Claude Code's hook records: its
    telemetry has no tool spans) and the execute_tool usage rows (a framework's GenAI spans). A tool
    span of a session is in both (usage.tool_spans): the ledger's copy, named by CLIENT_ID_PREFIX, is
    left out there."""
    visible = usage_visible_to(actor=actor)
    filters = _rollup_filters(
        when="occurred_at",
        task_of="",
        since=since,
        until=until,
        agent=agent,
        task=task,
        campaign=campaign,
        session=session,
    )
    queryset = visible.filter(filters)
    if group_by == "day":
        queryset = queryset.annotate(day=TruncDate("occurred_at"))
    key = _GROUP_KEY[group_by]
    names = [key] + ([_GROUP_LABEL[group_by]] if group_by in _GROUP_LABEL else [])
    groups = {}
    for row in queryset.values(*names).annotate(**_totals()).order_by():
        groups[row[key]] = {
            # Agent slug, task or campaign id, or YYYY-MM-DD; None for the rows with no task or campaign.
            "key": row[_GROUP_LABEL["agent"]] if group_by == "agent" else _text(row[key]),
            "label": row.get(_GROUP_LABEL.get(group_by, ""), None),
            **{name: row[name] for name in (*TOKEN_FIELDS, "cost_usd", "requests", "tool_calls")},
        }
    for call_key, label, count in _ledger_tool_calls(
        actor=actor,
        group_by=group_by,
        since=since,
        until=until,
        agent=agent,
        task=task,
        campaign=campaign,
        session=session,
    ):
        group = groups.get(call_key)
        if group is None:
            group = groups[call_key] = {
                "key": label if group_by == "agent" else _text(call_key),
                "label": label,
                **dict.fromkeys((*TOKEN_FIELDS, "requests", "tool_calls"), 0),
                "cost_usd": Decimal(0),
            }
        group["tool_calls"] += count
    if group_by == "day":
        order = sorted(groups)
    else:
        # Largest cost first, then by key (the group with no task or campaign first).
        order = sorted(groups, key=lambda k: (-groups[k]["cost_usd"], k is not None, k or 0))
    return [groups[k] for k in order]


def _rollup_filters(*, when: str, task_of: str, since, until, agent, task, campaign, session) -> Q:
    """The rollup's filters on usage rows (``task_of`` "") or on the ledger's tool calls, whose task is
    their session's (``task_of`` "session__"); ``when`` is the field the time window applies to."""
    filters = Q()
    if since is not None:
        filters &= Q(**{f"{when}__gte": since})
    if until is not None:
        filters &= Q(**{f"{when}__lt": until})
    if agent:
        filters &= Q(agent__slug=agent)
    if task is not None:
        filters &= Q(**{f"{task_of}task_id": task})
    if campaign is not None:
        filters &= Q(**{f"{task_of}task__campaign_id": campaign})
    if session:
        filters &= Q(session_id=session)
    return filters


def _ledger_tool_calls(
    *, actor: Actor, group_by: str, since, until, agent, task, campaign, session
) -> list[tuple[object, str | None, int]]:
    """(group key, label, count) of the ledger's tool calls under the rollup's filters (its started_at
    the time), tool spans' copies left out: one aggregate query."""
    calls = ToolInvocation.objects.exclude(client_id__startswith=CLIENT_ID_PREFIX)
    if not (actor.is_staff or actor.can_orchestrate):
        calls = calls.filter(agent=actor.agent)
    filters = _rollup_filters(
        when="started_at",
        task_of="session__",
        since=since,
        until=until,
        agent=agent,
        task=task,
        campaign=campaign,
        session=session,
    )
    calls = calls.filter(filters)
    if group_by == "day":
        calls = calls.annotate(day=TruncDate("started_at"))
    key, label = _CALL_KEY[group_by], _CALL_LABEL.get(group_by)
    rows = calls.values(*([key, label] if label else [key])).annotate(n=Count("id")).order_by()
    return [(row[key], row[label] if label else None, row["n"]) for row in rows]


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


def usage_by_session(*, session_ids: list[str]) -> dict[str, dict]:
    """Tokens and cost per session (a run's attempt is its session), one aggregate query; a session
    with no usage is left out. The caller decides who may read them (a task's runs: its readers)."""
    if not session_ids:
        return {}
    rows = UsageRecord.objects.filter(session_id__in=session_ids).values("session_id").annotate(**_totals()).order_by()
    return {row["session_id"]: {name: row[name] for name in (*TOKEN_FIELDS, "cost_usd")} for row in rows}
