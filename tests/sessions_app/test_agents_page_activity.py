"""The agents page says when each agent was last active, whatever it sent: a heartbeat, or any
other request (an event, a tool call); never "never" for an agent at work."""

from datetime import timedelta

import pytest
from django.utils import timezone

from sessions_app import keys
from sessions_app.models import AgentApiKey
from tests.factories import AgentFactory

pytestmark = pytest.mark.django_db


def _card(html: str, slug: str) -> str:
    start = html.index(f"<code>{slug}</code>")
    return html[start : html.index("</p>", start)]


def test_an_agent_that_only_posts_events_shows_as_active_not_never(engineer_client, agent_client, agent, session):
    # given an agent that never called the heartbeat endpoint, only posted an event
    keys.api_key_cache_clear()
    assert (
        agent_client.post(f"/api/v1/sessions/{session.pk}/events/", {"type": "log"}, format="json").status_code == 201
    )

    # when an engineer opens the agents page
    html = engineer_client.get("/agents/").content.decode()

    # then its card says when: the time its request was counted as a heartbeat
    agent.refresh_from_db()
    card = _card(html, "claude-1")
    assert f'last active <time datetime="{agent.last_heartbeat_at.isoformat()}">' in card
    assert "never" not in card


def test_the_latest_of_heartbeat_and_key_use_is_shown_and_a_silent_agent_is_never_heard_from(engineer_client):
    now = timezone.now()
    keyed = AgentFactory(slug="keyed", last_heartbeat_at=now - timedelta(days=3))
    key = keys.api_key_create(agent=keyed).api_key
    AgentApiKey.objects.filter(pk=key.pk).update(last_used_at=now - timedelta(minutes=5))
    AgentFactory(slug="silent")

    html = engineer_client.get("/agents/").content.decode()

    keyed_card = _card(html, "keyed")
    used = AgentApiKey.objects.get(pk=key.pk).last_used_at.isoformat()
    assert f'last active <time datetime="{used}">' in keyed_card
    assert _card(html, "silent").endswith("never heard from")
