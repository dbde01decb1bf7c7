"""The agents page: status, what each agent holds, and its metrics over a chosen period."""

from django.shortcuts import render
from django.views.decorators.http import require_GET

from composition.metrics import DEFAULT_PERIOD, PERIODS
from composition.page_selectors import CHART_HEIGHT, CHART_WIDTH, agent_overview
from config.pages import ENGINEERING, page_for

PERIOD_LABELS = {"24h": "Last 24 hours", "7d": "Last 7 days", "30d": "Last 30 days"}


@page_for(ENGINEERING)
@require_GET
def agent_list(request):
    period = request.GET.get("period", DEFAULT_PERIOD)
    if period not in PERIODS:
        period = DEFAULT_PERIOD
    window, rows = agent_overview(period=period)
    context = {
        "rows": rows,
        "window": window,
        "period": period,
        "periods": [(key, PERIOD_LABELS[key]) for key in PERIODS],
        "chart_width": CHART_WIDTH,
        "chart_height": CHART_HEIGHT,
        "axis_format": "H:i" if window.bucket == "hour" else "M j",
    }
    return render(request, "sessions/agent_list.html", context)
