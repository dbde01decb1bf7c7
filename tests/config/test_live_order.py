"""On the in-memory layer (the embedded default) a topic's numbers reach the layer in the order they were
taken, however many request threads send at once: a page never sees a gap that is only a reordering
(config/live.py: the number is taken on the event loop, as the message is handed to the layer)."""

import asyncio
import sys

from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer

from config import live

SENDERS, EACH = 8, 100


def test_messages_sent_by_many_threads_at_once_arrive_in_number_order(settings):
    settings.REDIS_URL = None
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels.layers.InMemoryChannelLayer", "CONFIG": {"capacity": 2 * SENDERS * EACH}}
    }

    def sender(n: int) -> None:
        for i in range(EACH):
            live._send("test.order", {"sender": n, "i": i})

    async def scenario() -> list[dict]:
        layer = get_channel_layer()
        channel = await layer.new_channel()
        await layer.group_add("test.order", channel)
        switch = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)  # threads switched out as often as CPython allows
        try:
            await asyncio.gather(*(sync_to_async(sender, thread_sensitive=False)(n) for n in range(SENDERS)))
        finally:
            sys.setswitchinterval(switch)
        return [await layer.receive(channel) for _ in range(SENDERS * EACH)]

    messages = async_to_sync(scenario)()

    seqs = [message["seq"] for message in messages]
    assert seqs == list(range(seqs[0], seqs[0] + SENDERS * EACH))
    for n in range(SENDERS):  # and each thread's own messages in the order it sent them
        assert [m["i"] for m in messages if m["sender"] == n] == list(range(EACH))
