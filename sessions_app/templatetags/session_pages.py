"""Small display helpers for the session pages. Output is escaped by the templates as usual."""

import json

from django import template
from django.utils import timezone

register = template.Library()

SUMMARY_KEYS = ("line", "message", "text", "question", "prompt", "answer", "summary", "title", "to")
SUMMARY_MAX = 300


@register.filter
def event_summary(payload) -> str:
    """The one line worth reading in an event's payload, else the payload as compact JSON."""
    if not isinstance(payload, dict) or not payload:
        return ""
    for key in SUMMARY_KEYS:
        value = payload.get(key)
        if isinstance(value, str) and value.strip():
            return _cap(value)
    return _cap(json.dumps(payload, separators=(",", ":"), ensure_ascii=False, default=str))


@register.filter
def duration(ms) -> str:
    """Milliseconds as a short human duration: 840 ms, 12.3 s, 4 min 05 s, 2 h 10 min."""
    if ms is None:
        return "—"
    ms = int(ms)
    if ms < 1000:
        return f"{ms} ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, sec = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {sec:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


@register.filter
def seconds_duration(seconds) -> str:
    return "—" if seconds is None else duration(seconds * 1000)


@register.filter
def age(moment) -> str:
    """How long ago, short: 12 s, 5 min, 3 h, 4 d."""
    if moment is None:
        return "never"
    seconds = max(0, int((timezone.now() - moment).total_seconds()))
    return age_seconds(seconds)


@register.filter
def age_seconds(seconds) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min"
    if seconds < 86400:
        return f"{seconds // 3600} h"
    return f"{seconds // 86400} d"


@register.filter
def percent(rate) -> str:
    return "—" if rate is None else f"{rate * 100:.0f}%"


def _cap(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SUMMARY_MAX else text[: SUMMARY_MAX - 1] + "…"
