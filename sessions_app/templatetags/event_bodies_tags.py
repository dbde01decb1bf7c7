"""``{% event_body e %}``: a diff or plan event's body on the session page (sessions_app/event_bodies.py)."""

import json

from django import template
from django.utils.safestring import mark_safe

from sessions_app.event_bodies import diff_html, diff_text, plan_steps

register = template.Library()
STAT_MAX = 4000


@register.inclusion_tag("sessions/_event_body.html")
def event_body(event):
    payload = event.payload if isinstance(event.payload, dict) else {}
    body = {"event": event, "kind": "", "payload": payload}
    if event.type == "diff":
        text = diff_text(payload)
        if text:
            body.update(kind="diff", html=mark_safe(diff_html(text)))  # safe: Pygments escaped the agent's text
        elif isinstance(payload.get("stat"), str):
            body.update(kind="stat", stat=payload["stat"][:STAT_MAX], commit=str(payload.get("commit") or "")[:64])
    elif event.type == "plan_update":
        steps = plan_steps(payload)
        if steps:
            body.update(kind="plan", steps=steps)
    if not body["kind"]:
        body["json"] = json.dumps(payload, ensure_ascii=False, default=str)[:300]
    return body
