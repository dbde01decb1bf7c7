"""The live session page: SessionConsumer at ws/sessions/<id>/ pushes what services change,
after commit, as out-of-band HTML from the page's own partials."""

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser

from composition.routing import websocket_urlpatterns
from config.pages import ENGINEERS, PRODUCT_OWNERS
from tests.factories import SessionFactory
from tests.page_users import user_in
from tests.worker import WS_TIMEOUT

pytestmark = pytest.mark.django_db(transaction=True)


def _communicator(user, session_id="live-1") -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/sessions/{session_id}/")
    communicator.scope["user"] = user
    return communicator


def _connects(user, session_id="live-1") -> bool:
    async def attempt():
        communicator = _communicator(user, session_id)
        connected, _ = await communicator.connect(timeout=WS_TIMEOUT)
        await communicator.disconnect()
        return connected

    return async_to_sync(attempt)()


def test_anonymous_is_refused(agent):
    SessionFactory(agent=agent, id="live-1")

    assert _connects(AnonymousUser()) is False


def test_a_product_owner_is_refused(agent):
    SessionFactory(agent=agent, id="live-1")

    assert _connects(user_in(PRODUCT_OWNERS)) is False


def test_an_unknown_session_is_refused():
    assert _connects(user_in(ENGINEERS), session_id="nope") is False


def test_an_event_posted_through_the_api_arrives_as_rendered_html(agent, agent_client):
    SessionFactory(agent=agent, id="live-1")
    engineer = user_in(ENGINEERS)

    async def scenario():
        communicator = _communicator(engineer)
        connected, _ = await communicator.connect(timeout=WS_TIMEOUT)
        assert connected
        response = await sync_to_async(agent_client.post)(
            "/api/v1/sessions/live-1/events/", {"type": "log", "payload": {"line": "<hello>"}}, format="json"
        )
        assert response.status_code == 201
        html = await communicator.receive_from(timeout=WS_TIMEOUT)
        await communicator.disconnect()
        return response.json()["seq"], html

    seq, html = async_to_sync(scenario)()

    assert '<ol id="event-list" hx-swap-oob="beforeend">' in html
    assert f'<li id="event-{seq}" class="event type-log"><span class="seq">#{seq}</span>' in html
    assert "&lt;hello&gt;" in html


def test_a_transition_redraws_the_header_and_the_reply_box(agent, agent_client):
    SessionFactory(agent=agent, id="live-1")
    engineer = user_in(ENGINEERS)

    async def scenario():
        communicator = _communicator(engineer)
        assert (await communicator.connect(timeout=WS_TIMEOUT))[0]
        response = await sync_to_async(agent_client.post)(
            "/api/v1/sessions/live-1/transition/", {"status": "waiting_for_input"}, format="json"
        )
        assert response.status_code == 200
        html = await communicator.receive_from(timeout=WS_TIMEOUT)
        await communicator.disconnect()
        return html

    html = async_to_sync(scenario)()

    assert 'id="session-header"' in html and 'hx-swap-oob="true"' in html
    assert "Waiting for input" in html
    assert 'id="session-input"' in html and 'name="answer"' in html
    assert "type-status_change" in html


def test_tool_calls_arrive_as_rows_and_are_redrawn_when_they_finish(agent, agent_client):
    SessionFactory(agent=agent, id="live-1")
    engineer = user_in(ENGINEERS)

    async def scenario():
        communicator = _communicator(engineer)
        assert (await communicator.connect(timeout=WS_TIMEOUT))[0]
        created = await sync_to_async(agent_client.post)(
            "/api/v1/sessions/live-1/tool-calls/", {"tool_name": "Bash", "input": {"cmd": "ls"}}, format="json"
        )
        first = await communicator.receive_from(timeout=WS_TIMEOUT)
        call_id = created.json()["id"]
        await sync_to_async(agent_client.patch)(
            f"/api/v1/tool-calls/{call_id}/", {"status": "failure", "error": "boom"}, format="json"
        )
        second = await communicator.receive_from(timeout=WS_TIMEOUT)
        await communicator.disconnect()
        return call_id, first, second

    call_id, first, second = async_to_sync(scenario)()

    assert '<tbody id="toolcall-rows" hx-swap-oob="beforeend">' in first
    assert f'<tr id="toolcall-{call_id}" class="toolcall running">' in first
    assert f'<tr id="toolcall-{call_id}" class="toolcall failure" hx-swap-oob="true">' in second
    assert "boom" in second
