"""Small filters for board cards; each runs once per card, so they stay plain Python."""

from datetime import datetime
from urllib.parse import urlsplit

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


_C0_AND_SPACE = "".join(chr(n) for n in range(0x21))  # what a browser strips from a URL's ends


def _same_site_image(value: str) -> bool:
    """Is an image's ``src`` a path on this site? A browser fetches an image as soon as the card
    opens, so one from elsewhere tells its owner who read the card and when (a tracking pixel).
    Browsers drop tabs and newlines inside a URL and read a backslash as a slash: ``/\\host/x`` and
    ``/<tab>/host/x`` are ``//host/x``, so those are refused before the URL is read."""
    if "\\" in value or any(c in value for c in "\t\n\r"):
        return False
    stripped = value.strip(_C0_AND_SPACE)
    parts = urlsplit(stripped)
    return not parts.scheme and not parts.netloc and not stripped.startswith("//")


def _drop_external_images(element: str, attribute: str, value: str) -> str | None:
    if element == "img" and attribute == "src" and not _same_site_image(value):
        return None  # the image goes; its alt text stays, so the reader sees what was there
    return value


# Made once: a card's description is rendered on every panel opening.
_CLEANER = nh3.Cleaner(attribute_filter=_drop_external_images)


@register.filter
def markdown_safe(text: str) -> str:
    """Markdown to HTML, then sanitised: a description is written by people and agents alike. Images
    from other sites are dropped (see _same_site_image); the pages' CSP (config.security_headers) refuses
    them too."""
    html = markdown.markdown(text or "", extensions=["fenced_code", "tables", "sane_lists"])
    return mark_safe(_CLEANER.clean(html))  # safe: nh3 has just removed anything unsafe
