"""Usage on the pages of the apps below usage (sessions, agents, campaigns, the admin).

Their templates ``{% load usage_pages %}``: a template naming a tag library is not an import, so
sessions_app and board keep to their layer while usage reads its own rows (usage/pages/).
Each tag is one query, for the whole page's list where the page shows several things.
"""

from decimal import Decimal
from urllib.parse import urlencode

from django import template

from board.models import Task
from sessions_app.models import Agent, AgentSession
from usage.pages import selectors
from usage.pages.charts import usage_chart as chart_for

register = template.Library()


@register.filter
def tokens_short(value) -> str:
    """12, 950, 12.3k, 4.6M: a card has room for four characters."""
    n = int(value or 0)
    for size, unit in ((1_000_000_000, "B"), (1_000_000, "M"), (1_000, "k")):
        if n >= size:
            return f"{n / size:.1f}".removesuffix(".0") + unit
    return str(n)


@register.filter
def usd(value) -> str:
    """Dollars to the cent; a cost under a cent shows as such rather than as $0.00."""
    amount = Decimal(value or 0)
    if 0 < amount < Decimal("0.01"):
        return "<$0.01"
    return f"${amount:,.2f}"


@register.inclusion_tag("usage/_session_usage.html")
def session_usage(session: AgentSession, subagents=()) -> dict:
    """The session page's Usage block; ``subagents`` (the page's tree) names the child sessions."""
    usage = selectors.session_usage(session_id=session.pk)
    kinds = {child.session.pk: child.kind for child in subagents}
    rows = [
        (sid, "this session" if sid == session.pk else kinds.get(sid, "subagent"), t) for sid, t in usage.by_session
    ]
    return {"session": session, "usage": usage, "session_rows": rows}


@register.simple_tag
def agents_usage_charts() -> dict:
    """Every agent's chart of the last 30 days, by agent id: one query for the page."""
    days = selectors.chart_days()
    daily = selectors.agents_daily_usage(days=days)
    return {"days": days, "by_agent": {agent_id: chart_for(days=days, per_day=d) for agent_id, d in daily.items()}}


@register.inclusion_tag("usage/_agent_chart.html")
def agent_usage_chart(charts: dict, agent: Agent) -> dict:
    chart = charts["by_agent"].get(agent.pk) or chart_for(days=charts["days"], per_day={})
    return {"chart": chart, "agent": agent}


@register.simple_tag
def campaigns_usage(campaigns) -> dict:
    """What each campaign on the page spent, by campaign id: one query."""
    return selectors.campaigns_usage(campaign_ids=[campaign.pk for campaign in campaigns])


@register.inclusion_tag("usage/_campaign_spent.html")
def campaign_spent(spent: dict, campaign) -> dict:
    return {"totals": spent.get(campaign.pk), "campaign": campaign}


@register.inclusion_tag("usage/_admin_totals.html")
def usage_admin_totals(obj) -> dict:
    """Usage totals on a session's, task's or agent's admin change page, linked to its rows."""
    if isinstance(obj, AgentSession):
        totals, query = selectors.usage_totals(session_id=obj.pk), {"session": obj.pk}
    elif isinstance(obj, Task):
        totals, query = selectors.usage_totals(task_id=obj.pk), {"task": obj.pk}
    elif isinstance(obj, Agent):
        totals, query = selectors.usage_totals(agent_id=obj.pk), {"agent": obj.pk}
    else:
        return {"totals": None}
    return {"totals": totals, "query": urlencode(query), "subagents_included": isinstance(obj, AgentSession)}
