"""Geometry of the agents page's usage chart: cost per day as bars, tokens per day as a line
with a point on each day that had any, each scaled to its own peak. Drawn as inline SVG by
templates/usage/_agent_chart.html: no script, prints as it shows."""

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal

from usage.pages.selectors import Totals

WIDTH, HEIGHT = 300, 80
PLOT_TOP = 4  # room for the top point's radius


@dataclass(frozen=True)
class DayMark:
    day: dt.date
    x: float  # the bar's left edge
    width: float
    bar_y: float
    bar_height: float
    cx: float  # the token point
    cy: float
    cost_usd: Decimal
    tokens: int
    requests: int


@dataclass(frozen=True)
class UsageChart:
    days: list[dt.date]
    marks: list[DayMark]  # the days with any usage only
    line: str  # the token line over every day, zeros included: SVG polyline points
    peak_cost: Decimal
    peak_tokens: int
    total: Totals
    width: int = WIDTH
    height: int = HEIGHT


def _scaled(value, peak) -> float:
    return round(float(value) / float(peak) * (HEIGHT - PLOT_TOP), 2) if peak else 0.0


def usage_chart(*, days: list[dt.date], per_day: dict[dt.date, Totals]) -> UsageChart:
    slot = WIDTH / len(days)
    peak_cost = max((t.cost_usd for t in per_day.values()), default=Decimal(0))
    peak_tokens = max((t.tokens for t in per_day.values()), default=0)
    marks, points, total = [], [], Totals()
    for i, day in enumerate(days):
        totals = per_day.get(day)
        cx = round(i * slot + slot / 2, 2)
        cy = round(HEIGHT - _scaled(totals.tokens if totals else 0, peak_tokens), 2)
        points.append(f"{cx},{cy}")
        if totals is None:
            continue
        total.add(vars(totals))
        bar = _scaled(totals.cost_usd, peak_cost)
        marks.append(
            DayMark(
                day=day,
                x=round(i * slot + 1, 2),
                width=round(max(1.0, slot - 2), 2),
                bar_y=round(HEIGHT - bar, 2),
                bar_height=bar,
                cx=cx,
                cy=cy,
                cost_usd=totals.cost_usd,
                tokens=totals.tokens,
                requests=totals.requests,
            )
        )
    return UsageChart(
        days=days, marks=marks, line=" ".join(points), peak_cost=peak_cost, peak_tokens=peak_tokens, total=total
    )
