"""Small filters for board cards; each runs once per card, so they stay plain Python."""

from datetime import datetime

import markdown
import nh3
from django import template
from django.utils import timezone
from django.utils.safestring import mark_safe

register = template.Library()


@register.filter
def age(value: datetime | None) -> str:
    """'5m', '3h', '2d', '6w': short enough for a card, and cheaper than timesince."""
    if value is None:
        return ""
    seconds = max(0, int((timezone.now() - value).total_seconds()))
    for unit, size in (("w", 604800), ("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return "now"


@register.filter
def ago(value: datetime | None) -> str:
    """``age`` as a phrase: "5m ago", or "just now" (never "now ago")."""
    short = age(value)
    if short == "now":
        return "just now"
    return f"{short} ago" if short else ""


@register.filter
def markdown_safe(text: str) -> str:
    """Markdown to HTML, then sanitised: a description is written by people and agents alike."""
    html = markdown.markdown(text or "", extensions=["fenced_code", "tables", "sane_lists"])
    return mark_safe(nh3.clean(html))  # safe: nh3 has just removed anything unsafe
