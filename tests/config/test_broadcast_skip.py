"""A broadcast to a group nobody joined is skipped; one anybody joined is sent; the board's
sequence number is taken either way. Against a real Redis channel layer (skipped without Redis)."""

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction

from board.live import BOARD_GROUP, board_push_tasks, board_seq_current
from config.side_effects import broadcast
from config.speed.group_members import group_joined, group_members_key

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not settings.REDIS_URL, reason="needs the Redis channel layer (REDIS_URL)"),
]


@pytest.fixture
def layer():
    layer = get_channel_layer()
    async_to_sync(layer.flush)()
    yield layer
    async_to_sync(layer.flush)()


def _receive(layer, channel):
    async def receive():
        import asyncio

        try:
            return await asyncio.wait_for(layer.receive(channel), timeout=1)
        except TimeoutError:
            return None

    return async_to_sync(receive)()


def test_the_members_key_is_where_channels_redis_keeps_the_group(layer):
    url, key = group_members_key(layer, "some.group")
    assert (url, key) == (settings.REDIS_URL, b"asgi:group:some.group")


def test_a_broadcast_nobody_listens_to_is_skipped_and_one_somebody_joined_arrives(layer, monkeypatch):
    # given one channel in group "a" and nobody in group "b"
    sent = _spy_on_group_send(layer, monkeypatch)
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)("a", channel)
    assert (group_joined(layer, "a"), group_joined(layer, "b")) == (True, False)

    # when both get a broadcast after commit
    with transaction.atomic():
        broadcast("b", {"type": "x.y", "n": 1})
        broadcast("a", {"type": "x.y", "n": 2})
        assert sent == []  # nothing before commit

    # then only "a" was sent to, and its member got the message
    assert sent == [("a", {"type": "x.y", "n": 2})]
    assert _receive(layer, channel) == {"type": "x.y", "n": 2}


def _spy_on_group_send(layer, monkeypatch) -> list:
    sent = []
    original = layer.group_send

    async def spy(group, message):
        sent.append((group, message))
        await original(group, message)

    monkeypatch.setattr(layer, "group_send", spy)
    return sent


def test_board_pushes_take_a_number_with_no_board_open_and_a_board_that_joins_sees_the_gap(layer, monkeypatch):
    # given no board open
    sent = _spy_on_group_send(layer, monkeypatch)
    before = board_seq_current()

    # when a task changes, nothing is sent, but the number moves on
    board_push_tasks(task_ids=[1])
    assert sent == []
    assert board_seq_current() == before + 1

    # and once a board has joined, the next change reaches it with the next number
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(BOARD_GROUP, channel)
    board_push_tasks(task_ids=[2])
    message = _receive(layer, channel)
    assert (message["seq"], message["task_ids"]) == (before + 2, [2])
    assert [(group, m["seq"]) for group, m in sent] == [(BOARD_GROUP, before + 2)]
