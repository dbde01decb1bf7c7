"""A webhook in Slack's format: the message Slack's incoming webhooks accept, ``{"text", "blocks"}``.

A subscription whose ``format`` is ``slack`` gets this body instead of the signed event document
(webhooks.py: ``webhook_event_body``); the signature headers are sent as for any delivery and
Slack ignores them. A session waiting for input (``session.status_changed`` to
``waiting_for_input``, with the question's summary from sessions_app/permission_requests.py) becomes
the question, who asks it, the session and its tasks, and a button to the session page where it is
answered; any other event a line naming it. Links are absolute from ``SWITCHYARD_PUBLIC_URL``
(settings.PUBLIC_URL); without it the message names the page's path.

Slack's text is mrkdwn: ``&``, ``<`` and ``>`` are escaped, so an agent's text cannot forge a link.
"""

import json

from django.conf import settings
from django.urls import reverse

from ledger.models import Event
from sessions_app.models import AgentSession

SECTION_MAX_CHARS = 2900  # Slack refuses a section text over 3000 characters
TASKS_SHOWN = 3


def slack_escape(text: str) -> str:
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_link(path: str) -> str:
    """The absolute URL of a page of this app, or "" without SWITCHYARD_PUBLIC_URL."""
    return f"{settings.PUBLIC_URL}{path}" if settings.PUBLIC_URL else ""


def slack_message(event: Event) -> dict:
    waiting = (
        event.subject_type == "session"
        and event.name == "session.status_changed"
        and (event.payload or {}).get("to") == AgentSession.Status.WAITING_FOR_INPUT
    )
    return _question_message(event) if waiting else _event_message(event)


def slack_message_body(event: Event) -> bytes:
    return json.dumps(slack_message(event), separators=(",", ":"), ensure_ascii=False).encode()


def _question_message(event: Event) -> dict:
    payload = event.payload or {}
    session = AgentSession.objects.filter(pk=event.subject_id).select_related("agent").first()
    agent = str(session.agent) if session is not None else event.actor
    question = str(payload.get("question") or payload.get("reason") or "an answer")
    if payload.get("choices") == ["allow", "deny"]:
        headline = f"{agent} asks permission to use {payload.get('tool_name') or 'a tool'}"
    elif payload.get("choices") == ["accept", "decline", "cancel"]:
        headline = f"{agent} relays a question from the MCP server {payload.get('mcp_server_name') or ''}".rstrip()
    else:
        headline = f"{agent} is waiting for an answer"
    path = reverse("sessions:detail", args=[event.subject_id])
    link = slack_link(path)
    where = [f"Session `{slack_escape(event.subject_id)}`"]
    tasks = list(session.claimed_tasks.order_by("pk")[:TASKS_SHOWN]) if session is not None else []
    where += [f"Task #{task.pk} {slack_escape(task.title)}" for task in tasks]
    quoted = "\n".join(f"> {line}" for line in slack_escape(question).splitlines() or [""])
    blocks: list[dict] = [
        {
            "type": "section",
            "text": {"type": "mrkdwn", "text": f"*{slack_escape(headline)}*\n{quoted}"[:SECTION_MAX_CHARS]},
        },
        {"type": "context", "elements": [{"type": "mrkdwn", "text": " · ".join(where)[:SECTION_MAX_CHARS]}]},
    ]
    if link:
        button = {"type": "button", "text": {"type": "plain_text", "text": "Answer in Switchyard"}, "url": link}
        blocks.append({"type": "actions", "elements": [{**button, "style": "primary"}]})
    else:
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": f"Answer on {path}"}]})
    text = f"{headline}: {question}" + (f" — {link}" if link else "")
    return {"text": slack_escape(text)[:SECTION_MAX_CHARS], "blocks": blocks}


def _event_message(event: Event) -> dict:
    text = f"{event.name}: {event.subject_type} {event.subject_id}" + (f" by {event.actor}" if event.actor else "")
    return {
        "text": slack_escape(text),
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": slack_escape(text)}}],
    }
