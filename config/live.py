"""Live pages (issue 14): the one way a committed change reaches the pages open on it.

A *topic* is a channel-layer group name ("board", "session.<digest>"). A service calls
``publish`` (or ``publish_ids``, which folds every call of one transaction into one message)
while it writes; after commit (config/side_effects.py) the topic's next number is taken and one
message goes to the topic's group, only when somebody has joined it. The number is taken even
then: a page rendered before the change that joins after it sees the gap at its next message.

The writer's side is cheap on purpose, because it runs on the API's hot paths: no SQL; with
Redis, the INCR and the count of the group's members share one round trip; with the in-memory
layer (the embedded default, one process) an in-process counter, taken on the event loop as the
message is handed to the layer, so one process's numbers reach its hub in order.

Each process has one member of a topic's group, its ``LiveHub``: it receives every message once,
puts messages back in number order, renders each once and writes it to every page of that topic
it holds (``LiveConsumer``). A page carries the number it was rendered at; when a message's
number is not the last one + 1 (one missed, a restarted Redis counting again, a reconnect), the
page refetches what it shows instead of applying the message (static/js/board.js, live.js).

Group message: ``{"type": "live.message", "id": <uuid hex>, "seq": <int>, "at": <epoch s>, **payload}``.
"""

import asyncio
import json
import logging
import threading
import time
import uuid
import weakref
from collections.abc import Awaitable, Callable, Iterable

from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction

from config.side_effects import after_commit
from config.speed.group_members import group_members_key, redis_client

logger = logging.getLogger(__name__)

LIVE_MESSAGE = "live.message"
SEQ_KEY = "switchyard:live:{}:seq"
# A topic's counter lives this long after its last message: a page older than that sees the
# count start again at 1, which it takes for a gap.
SEQ_KEPT_SECONDS = 7 * 24 * 3600

_local_seqs: dict[str, int] = {}
_local_seqs_lock = threading.Lock()


# --- Numbering --------------------------------------------------------------------------------


def _redis():
    return redis_client(settings.REDIS_URL)


def live_seq_current(topic: str) -> int:
    """The last number handed out on ``topic`` (0 if none): a page carries it so it spots what it missed."""
    if settings.REDIS_URL:
        return int(_redis().get(SEQ_KEY.format(topic)) or 0)
    return _local_seqs.get(topic, 0)


def _local_seq_next(topic: str) -> int:
    """The topic's next number in this process (no Redis). No await inside: on the event loop it is
    taken for a moment, never across a switch of the loop."""
    with _local_seqs_lock:
        seq = _local_seqs[topic] = _local_seqs.get(topic, 0) + 1
    return seq


def _seq_next_and_joined(layer, topic: str) -> tuple[int, bool]:
    """The topic's next number, and whether anybody joined its group (True when the layer can't say)."""
    members = group_members_key(layer, topic)  # (Redis URL, key) of the group's members, or None
    shared = members is not None and members[0] == settings.REDIS_URL
    if settings.REDIS_URL:
        pipe = _redis().pipeline(transaction=False)  # one round trip for all three
        pipe.incr(SEQ_KEY.format(topic))
        pipe.expire(SEQ_KEY.format(topic), SEQ_KEPT_SECONDS)
        if shared:
            pipe.zcard(members[1])
        seq, *rest = pipe.execute()
    else:
        seq = _local_seq_next(topic)
    if members is None:
        return int(seq), True
    joined = rest[1] if shared else redis_client(members[0]).zcard(members[1])
    return int(seq), joined > 0


# --- Publishing (after commit) ----------------------------------------------------------------


def _message(seq: int, payload: dict) -> dict:
    # ``at``: when the change was committed and sent (epoch seconds), for latency figures.
    return {"type": LIVE_MESSAGE, "id": uuid.uuid4().hex, "seq": seq, "at": time.time(), **payload}


def _send(topic: str, payload: dict) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    if not settings.REDIS_URL and group_members_key(layer, topic) is None:
        # One process, one in-memory layer: the number is taken on the event loop, as the message
        # is handed to the layer, so numbers reach the hub in order. Taken here, in the request's
        # thread, a thread switched out between the number and the send let a later number arrive
        # first; the hub held it 50 ms, then every page saw a gap and refetched the board.
        async_to_sync(_send_numbered_on_loop)(layer, topic, payload)
        return
    seq, joined = _seq_next_and_joined(layer, topic)
    if not joined:
        return
    async_to_sync(layer.group_send)(topic, _message(seq, payload))


async def _send_numbered_on_loop(layer, topic: str, payload: dict) -> None:
    await layer.group_send(topic, _message(_local_seq_next(topic), payload))


def publish(topic: str, payload: dict) -> None:
    """After commit, send ``payload`` (ids, never ORM objects) to ``topic``'s pages under its next number."""
    after_commit(lambda: _send(topic, payload))


class _IdBatch:
    """The ids one transaction published on a topic; sent once, after it commits."""

    def __init__(self, topic: str, field: str) -> None:
        self.topic, self.field = topic, field
        self.ids: set[int] = set()
        self.sent = False

    def flush(self) -> None:
        self.sent = True
        if self.ids:
            _send(self.topic, {self.field: sorted(self.ids)})


# (topic, field) -> the open transaction's batch, per thread (one thread, one connection). Held
# weakly: the only strong reference is the batch's on-commit callback, so a rollback (which drops
# the callback, of the transaction or of the savepoint that made the batch) drops the batch too.
_batches = threading.local()


def publish_ids(topic: str, *, ids: Iterable[int], field: str) -> None:
    """After commit, send ``{field: [ids]}`` to ``topic``: every call in one transaction shares one
    message. A rolled-back savepoint inside a batch's transaction may leave its ids in it, which
    only re-sends them as they are."""
    ids = {int(i) for i in ids if i is not None}
    if not ids:
        return
    batches = getattr(_batches, "by_topic", None)
    if batches is None:
        batches = _batches.by_topic = {}
    ref = batches.get((topic, field))
    batch = ref() if ref is not None else None
    if batch is None or batch.sent or not transaction.get_connection().in_atomic_block:
        batch = _IdBatch(topic, field)
        batch.ids |= ids
        batches[(topic, field)] = weakref.ref(batch)
        after_commit(batch.flush)  # in autocommit this sends at once
        return
    batch.ids |= ids


# --- Receiving: one hub per process and topic -------------------------------------------------

Render = Callable[[dict], Awaitable[str | None]]


def _raise_if_cancelled() -> None:
    """Re-raise a cancel that came out of the channel layer as an error. A cancel that reaches the
    task inside redis-py's read can surface as its "Timeout reading" TimeoutError (the read's own
    deadline, an asyncio.timeout, takes the cancel for its own), and a loop that retries on errors
    then never ended: CI saw one keep a test's event loop from closing for five minutes, logging
    every half second. The task still counts the cancel."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


class LiveHub:
    """This process's member of a topic's group; it fans each message out to the topic's pages.

    Changes committed at the same moment by different requests take their numbers in one order
    and may reach the layer in another. The hub puts them back in order, holding one that came
    early for at most ``HOLD_SECONDS`` while the numbers before it arrive; if they don't, it sends
    what it holds and the pages see the gap and refetch.

    ``render(message)`` turns a message into the frame every page gets (once per process and
    message; None sends nothing); ``companions`` are coroutines run while any page is open.
    """

    HOLD_SECONDS = 0.05
    # The hub's membership of its group is written again this often, and whenever a page joins. A
    # membership is only a row in the layer: Redis drops it after channels_redis's group_expiry (a day)
    # and with everything else when it restarts or is flushed, and a hub that went on believing it
    # was joined would push nothing to its pages, with no error, until the last one closed.
    REJOIN_SECONDS = 60.0

    def __init__(self, topic: str, render: Render, companions: Iterable[Callable[[], Awaitable]] = ()) -> None:
        self.topic, self.render, self.companions = topic, render, list(companions)
        self.layer = None
        self.pages: set = set()
        self.channel: str | None = None
        self.tasks: list[asyncio.Task] = []
        self.lock = asyncio.Lock()
        self.retired = False

    async def join(self, page) -> bool:
        """Add ``page``; False when this hub was retired meanwhile (take a new one)."""
        async with self.lock:
            if self.retired:
                return False
            self.pages.add(page)
            if self.tasks:
                await self.layer.group_add(self.topic, self.channel)  # still joined (see REJOIN_SECONDS)
            else:
                self.layer = get_channel_layer()
                # The default prefix: channels_redis reads all of a process's channels through one key per prefix.
                self.channel = await self.layer.new_channel()
                await self.layer.group_add(self.topic, self.channel)
                # Receiving is never cancelled mid-wait (channels_redis would drop a buffered message):
                # one task only receives, the other orders, renders and sends.
                arrived: asyncio.Queue = asyncio.Queue()
                self.tasks = [
                    asyncio.ensure_future(self._receive(self.channel, arrived)),
                    asyncio.ensure_future(self._deliver(arrived)),
                    asyncio.ensure_future(self._stay_joined(self.channel)),
                    *(asyncio.ensure_future(companion()) for companion in self.companions),
                ]
            return True

    async def leave(self, page) -> None:
        async with self.lock:
            self.pages.discard(page)
            if self.pages or not self.tasks:
                return
            for task in self.tasks:
                task.cancel()
            await self.layer.group_discard(self.topic, self.channel)
            self.tasks, self.channel, self.retired = [], None, True
            hubs = _hubs.get(asyncio.get_running_loop(), {})
            if hubs.get(self.topic) is self:
                del hubs[self.topic]

    async def _stay_joined(self, channel: str) -> None:
        while True:
            await asyncio.sleep(self.REJOIN_SECONDS)
            try:
                await self.layer.group_add(self.topic, channel)
            except asyncio.CancelledError:
                raise
            except Exception:
                _raise_if_cancelled()
                logger.exception("live hub %s: could not renew its membership of the group", self.topic)

    async def _receive(self, channel: str, arrived: asyncio.Queue) -> None:
        while True:
            try:
                message = await self.layer.receive(channel)
            except asyncio.CancelledError:
                raise
            except Exception:
                _raise_if_cancelled()
                logger.exception("live hub %s: the channel layer did not answer", self.topic)
                await asyncio.sleep(0.5)
                continue
            if message.get("type") == LIVE_MESSAGE:
                arrived.put_nowait(message)

    async def _deliver(self, arrived: asyncio.Queue) -> None:
        loop = asyncio.get_running_loop()
        expected: int | None = None  # the number that should come next
        held: dict[int, dict] = {}
        give_up_at = 0.0  # when the oldest held message goes out whatever is missing
        while True:
            try:
                wait = max(0.0, give_up_at - loop.time()) if held else None
                message = await asyncio.wait_for(arrived.get(), wait)
            except TimeoutError:
                message = None
            if message is not None:
                seq = message["seq"]
                if expected is not None and seq > expected:
                    if not held:
                        give_up_at = loop.time() + self.HOLD_SECONDS
                    held[seq] = message
                    if loop.time() < give_up_at:
                        continue
                    message = None  # held long enough, while others kept arriving
                else:
                    # In order, or a number from before (a restarted Redis counts again): send it now.
                    await self._send(message)
                    expected = seq + 1
            if message is None and held:
                # What came before the held ones did not come in time: the pages will see the gap.
                expected = min(held)
            while expected in held:
                await self._send(held.pop(expected))
                expected += 1

    async def _send(self, message: dict) -> None:
        try:
            text = await self.render(message)
        except Exception:
            # One change that can't be rendered must not end every page's pushes: the pages see
            # the gap at the next message and refetch.
            logger.exception("live hub %s: message %s could not be rendered", self.topic, message.get("seq"))
            return
        if text is None:
            return
        # Concurrently, so one slow connection holds up no other page's copy.
        await asyncio.gather(*(page.send(text_data=text) for page in list(self.pages)), return_exceptions=True)


_hubs: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, LiveHub]]" = weakref.WeakKeyDictionary()


def live_hub(topic: str, render: Render, companions: Iterable[Callable[[], Awaitable]] = ()) -> LiveHub:
    """This event loop's hub for ``topic`` (made on first use with ``render`` and ``companions``)."""
    hubs = _hubs.setdefault(asyncio.get_running_loop(), {})
    hub = hubs.get(topic)
    if hub is None:
        hub = hubs[topic] = LiveHub(topic, render, companions)
    return hub


class LiveConsumer(AsyncWebsocketConsumer):
    """A page's websocket: an adapter that joins its topic's hub and gets the hub's frames.

    Subclasses say which topic a connection may follow (``live_topic``, None refuses the
    handshake), how a message becomes a frame (``live_render``) and what else runs while pages
    are open (``live_companions``). With ``hello``, the first frame is ``{"type": "hello", "seq": N}``:
    the topic's number right after joining, so a page sees at once what it missed.
    """

    hello = True
    hub: LiveHub | None = None

    async def live_topic(self) -> str | None:
        raise NotImplementedError

    @staticmethod
    async def live_render(message: dict) -> str | None:
        raise NotImplementedError

    def live_companions(self) -> list[Callable[[], Awaitable]]:
        return []

    async def connect(self):
        topic = await self.live_topic()
        if topic is None:
            await self.close()  # before accept: the handshake is refused with a 403
            return
        if self.hello:
            await self.accept()
        # Joined before the hello number is read, so no change falls between the two: one made
        # meanwhile may arrive just before the hello, and the client checks both against its page.
        # Without a hello, joined before the socket opens: a change made once the page sees it
        # open reaches it (one in between, before accept, can't be sent and shows as a gap).
        while True:
            hub = live_hub(topic, type(self).live_render, self.live_companions())
            if await hub.join(self):
                break
        self.hub = hub
        if not self.hello:
            await self.accept()
        else:
            seq = await database_sync_to_async(live_seq_current)(topic)
            await self.send(text_data=json.dumps({"type": "hello", "seq": seq}))

    async def disconnect(self, code):
        if self.hub is not None:
            await self.hub.leave(self)

    async def receive(self, text_data=None, bytes_data=None):
        pass  # pages only listen; changes go through HTTP views and their services
