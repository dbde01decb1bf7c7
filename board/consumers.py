"""The board's websocket: every open board gets changed cards as OOB HTML.

To the client (JSON text frames):
- ``{"type": "hello", "seq": N}`` right after connecting: the last sequence number handed out;
- ``{"type": "tasks", "seq": N, "at": <epoch s of the commit>, "html": "<li id=task-.. hx-swap-oob=true>..
  <span id=count-..>", "removed": [ids]}`` after every committed change (board/live.py).
A client that sees a number other than last + 1, or reconnects, refetches the board.

One member of the channel layer's board group per process (``BoardHub``), not one per open
board: a change is received and rendered once per process and written to each of its boards.
A hundred boards otherwise cost a hundred layer messages, queues and handler dispatches per
change, which on two cores put pushes seconds behind at 50 changes a second.
"""

import asyncio
import json
import logging
import weakref

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.layers import get_channel_layer

from board.embedded_bridge import bridge_needed, task_table_watch
from board.live import BOARD_GROUP, board_cards_render, board_seq_current
from config.pages import BOARD, user_may

logger = logging.getLogger(__name__)


@database_sync_to_async
def _may_see_board(user) -> bool:
    return user is not None and user.is_authenticated and user_may(user, BOARD)


# Not thread-sensitive: a render must not queue behind the HTTP views on the one shared thread.
def _render_sync(seq: int, task_ids: list[int], at: float | None) -> str:
    return json.dumps({"type": "tasks", "seq": seq, "at": at, **board_cards_render(task_ids=task_ids)})


_render = database_sync_to_async(_render_sync, thread_sensitive=False)


class BoardHub:
    """This process's member of the board group; it fans each change out to the open boards.

    Changes committed at the same moment by different requests take their numbers in one order
    and may reach the layer in another. The hub puts them back in order, holding one that came
    early for at most ``HOLD_SECONDS`` while the numbers before it arrive; if they don't, it sends
    what it holds and the boards see the gap and refetch.
    """

    HOLD_SECONDS = 0.05

    def __init__(self) -> None:
        self.layer = get_channel_layer()
        self.boards: set[AsyncWebsocketConsumer] = set()
        self.channel: str | None = None
        self.tasks: list[asyncio.Task] = []
        self.lock = asyncio.Lock()
        self.bridged = bridge_needed()

    async def join(self, board: AsyncWebsocketConsumer) -> None:
        async with self.lock:
            self.boards.add(board)
            if not self.tasks:
                # The default prefix: channels_redis reads all of a process's channels through one key per prefix.
                self.channel = await self.layer.new_channel()
                await self.layer.group_add(BOARD_GROUP, self.channel)
                # Receiving is never cancelled mid-wait (channels_redis would drop a buffered message):
                # one task only receives, the other orders, renders and sends.
                arrived: asyncio.Queue = asyncio.Queue()
                self.tasks = [
                    asyncio.ensure_future(self._receive(self.channel, arrived)),
                    asyncio.ensure_future(self._deliver(arrived)),
                ]
                if self.bridged:
                    self.tasks.append(asyncio.ensure_future(task_table_watch()))

    async def leave(self, board: AsyncWebsocketConsumer) -> None:
        async with self.lock:
            self.boards.discard(board)
            if self.boards or not self.tasks:
                return
            for task in self.tasks:
                task.cancel()
            await self.layer.group_discard(BOARD_GROUP, self.channel)
            self.tasks, self.channel = [], None

    async def _receive(self, channel: str, arrived: asyncio.Queue) -> None:
        while True:
            try:
                message = await self.layer.receive(channel)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("board hub: the channel layer did not answer")
                await asyncio.sleep(0.5)
                continue
            if message.get("type") == "board.tasks_changed":
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
                # What came before the held ones did not come in time: the boards will see the gap.
                expected = min(held)
            while expected in held:
                await self._send(held.pop(expected))
                expected += 1

    async def _send(self, message: dict) -> None:
        try:
            text = await _render(message["seq"], message["task_ids"], message.get("at"))
        except Exception:
            # One change that can't be rendered must not end every board's pushes: the boards see
            # the gap at the next message and refetch.
            logger.exception("board hub: change %s could not be rendered", message.get("seq"))
            return
        # Concurrently, so one slow connection holds up no other board's copy.
        await asyncio.gather(*(board.send(text_data=text) for board in list(self.boards)), return_exceptions=True)


_hubs: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, BoardHub]" = weakref.WeakKeyDictionary()


def board_hub() -> BoardHub:
    loop = asyncio.get_running_loop()
    hub = _hubs.get(loop)
    if hub is None:
        hub = _hubs[loop] = BoardHub()
    return hub


class BoardConsumer(AsyncWebsocketConsumer):
    joined = False

    async def connect(self):
        # The origin check is config/ws_origin.py's SameOriginValidator (scheme, host and port); here, who may look.
        if not await _may_see_board(self.scope.get("user")):
            await self.close()  # before accept: the handshake is refused with a 403
            return
        await self.accept()
        # Joined before the hello number is read, so no change falls between the two: one made
        # meanwhile may arrive just before the hello, and the client checks both against its page.
        await board_hub().join(self)
        self.joined = True
        seq = await database_sync_to_async(board_seq_current)()
        await self.send(text_data=json.dumps({"type": "hello", "seq": seq}))

    async def disconnect(self, code):
        if self.joined:
            await board_hub().leave(self)

    async def receive(self, text_data=None, bytes_data=None):
        pass  # the board only listens; moves go through the HTTP view and its service
