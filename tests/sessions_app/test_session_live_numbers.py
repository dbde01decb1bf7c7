"""The live session page is numbered like the board (config/live.py): the page carries the number
it was rendered at, and every frame starts with the next one, so the page spots one it missed."""

import re

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.test import Client

from config.pages import ENGINEERS
from tests.factories import SessionFactory
from tests.page_users import user_in
from tests.sessions_app.test_session_live import _communicator
from tests.worker import WS_TIMEOUT

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_page_carries_its_number_and_each_push_takes_the_next_one(agent, agent_client):
    SessionFactory(agent=agent, id="live-1")
    engineer = user_in(ENGINEERS)
    browser = Client()
    browser.force_login(engineer)
    agent_client.post("/api/v1/sessions/live-1/events/", {"type": "log", "payload": {"line": "before"}}, format="json")

    page = browser.get("/sessions/live-1/").content.decode()
    rendered_at = int(re.search(r'data-live-seq="(\d+)"', page).group(1))

    async def scenario():
        communicator = _communicator(engineer)
        assert (await communicator.connect(timeout=WS_TIMEOUT))[0]
        frames = []
        for line in ("one", "two"):
            await sync_to_async(agent_client.post)(
                "/api/v1/sessions/live-1/events/", {"type": "log", "payload": {"line": line}}, format="json"
            )
            frames.append(await communicator.receive_from(timeout=WS_TIMEOUT))
        await communicator.disconnect()
        return frames

    frames = async_to_sync(scenario)()

    assert rendered_at >= 1  # the event before the page took a number, with no page open
    assert [frame[: frame.index("-->") + 3] for frame in frames] == [
        f"<!--live:{rendered_at + 1}-->",
        f"<!--live:{rendered_at + 2}-->",
    ]
    assert "one" in frames[0] and "two" in frames[1]
