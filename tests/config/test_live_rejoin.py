"""A live hub stays a member of its topic's group (config/live.py: LiveHub.REJOIN_SECONDS): a
membership the layer lost (Redis restarted or flushed, channels_redis's day-long group expiry) is
written again when a page joins and every REJOIN_SECONDS, so the hub's pages get pushes again."""

import asyncio
import json
import uuid

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from config import live

WAIT_SECONDS = 10


class Page:
    def __init__(self) -> None:
        self.frames: asyncio.Queue = asyncio.Queue()

    async def send(self, text_data: str) -> None:
        self.frames.put_nowait(json.loads(text_data))


async def _render(message: dict) -> str:
    return json.dumps({"seq": message["seq"], "n": message["n"]})


def _message(seq: int) -> dict:
    return {"type": live.LIVE_MESSAGE, "id": uuid.uuid4().hex, "seq": seq, "at": 0, "n": seq}


def test_a_page_joining_a_hub_whose_membership_was_lost_gets_pushes_again():
    async def scenario() -> list[dict]:
        topic = f"test.rejoin.{uuid.uuid4().hex}"
        layer = get_channel_layer()
        hub = live.LiveHub(topic, _render)
        first, second = Page(), Page()
        assert await hub.join(first)
        try:
            # given the layer forgot the hub's membership (as a flushed or restarted Redis does)
            await layer.group_discard(topic, hub.channel)
            # when a second page joins the same hub and a change is pushed
            assert await hub.join(second)
            await layer.group_send(topic, _message(1))
            # then both pages get it
            return [await asyncio.wait_for(page.frames.get(), WAIT_SECONDS) for page in (first, second)]
        finally:
            await hub.leave(first)
            await hub.leave(second)

    assert async_to_sync(scenario)() == [{"seq": 1, "n": 1}, {"seq": 1, "n": 1}]


def test_a_hub_whose_membership_was_lost_writes_it_again_on_its_own(monkeypatch):
    monkeypatch.setattr(live.LiveHub, "REJOIN_SECONDS", 0.05)

    async def scenario() -> dict:
        topic = f"test.rejoin.{uuid.uuid4().hex}"
        layer = get_channel_layer()
        hub = live.LiveHub(topic, _render)
        page = Page()
        assert await hub.join(page)
        try:
            # given the layer forgot the hub's membership, and no page joins after
            await layer.group_discard(topic, hub.channel)
            # when changes keep being pushed
            seq, deadline = 0, asyncio.get_running_loop().time() + WAIT_SECONDS
            while asyncio.get_running_loop().time() < deadline:
                seq += 1
                await layer.group_send(topic, _message(seq))
                try:
                    return await asyncio.wait_for(page.frames.get(), 0.05)
                except TimeoutError:
                    continue
            raise AssertionError(f"no push reached the page in {WAIT_SECONDS} s")
        finally:
            await hub.leave(page)

    # then one reaches the page once the hub has joined again
    assert async_to_sync(scenario)()["n"] >= 1


def test_a_cancel_that_the_layers_read_turned_into_an_error_still_ends_the_hub(monkeypatch):
    """redis-py's read runs under its own deadline; when it fires as the hub leaves, Python 3.11
    raises one TimeoutError for both, and the hub's receive loop took it for a layer error."""
    cancels = []

    async def receive_that_turns_a_cancel_into_an_error(channel):
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancels.append(channel)
            if len(cancels) == 1:  # the first, as redis-py's read did; a later one ends it (no hang)
                raise TimeoutError("Timeout reading from 127.0.0.1:6379") from None
            raise

    async def scenario() -> set:
        hub = live.LiveHub(f"test.rejoin.{uuid.uuid4().hex}", _render)
        page = Page()
        assert await hub.join(page)
        monkeypatch.setattr(hub.layer, "receive", receive_that_turns_a_cancel_into_an_error)
        await asyncio.sleep(0.1)  # its tasks are waiting: the receive in its read
        tasks = list(hub.tasks)
        # when the last page leaves (the hub cancels its tasks)
        await hub.leave(page)
        done, pending = await asyncio.wait(tasks, timeout=WAIT_SECONDS)
        for task in pending:  # a hub that missed its cancel: end it here, so the test reports rather than hangs
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=WAIT_SECONDS)
        return pending

    # then every task of the hub ended, the receive loop too, after the one cancel
    assert async_to_sync(scenario)() == set()
    assert len(cancels) == 1
