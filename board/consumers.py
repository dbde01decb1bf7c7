"""The board's websocket: every open board joins one group and gets changed cards as OOB HTML.

To the client (JSON text frames):
- ``{"type": "hello", "seq": N}`` right after connecting: the last sequence number handed out;
- ``{"type": "tasks", "seq": N, "at": <epoch s of the commit>, "html": "<li id=task-.. hx-swap-oob=true>..
  <span id=count-..>", "removed": [ids]}`` after every committed change (board/live.py).
A client that sees a number other than last + 1, or reconnects, refetches the board.
"""

import asyncio
import json
import weakref
from collections import OrderedDict

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from board.embedded_bridge import bridge, bridge_needed
from board.live import BOARD_GROUP, board_cards_render, board_seq_current
from config.pages import BOARD, user_may

RENDERS_KEPT = 64
# Per event loop: message id -> the rendering of it. A hundred boards in one process render a
# change once, not a hundred times; keyed by loop because a future belongs to its loop.
_renders: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, OrderedDict]" = weakref.WeakKeyDictionary()


@database_sync_to_async
def _may_see_board(user) -> bool:
    return user is not None and user.is_authenticated and user_may(user, BOARD)


# Not thread-sensitive: a render must not queue behind the HTTP views on the one shared thread,
# or a hundred boards fall behind a burst of moves and the layer drops their messages.
def _render_sync(seq: int, task_ids: list[int], at: float | None) -> str:
    return json.dumps({"type": "tasks", "seq": seq, "at": at, **board_cards_render(task_ids=task_ids)})


_render = database_sync_to_async(_render_sync, thread_sensitive=False)


async def board_message_text(message: dict) -> str:
    """The frame for one group message, rendered once per process (see ``_renders``)."""
    cached = _renders.setdefault(asyncio.get_running_loop(), OrderedDict())
    future = cached.get(message["id"])
    if future is None:
        future = asyncio.ensure_future(_render(message["seq"], message["task_ids"], message.get("at")))
        cached[message["id"]] = future
        while len(cached) > RENDERS_KEPT:
            cached.popitem(last=False)
    return await future


class BoardConsumer(AsyncWebsocketConsumer):
    bridged = False  # watching the task table for other processes' changes (board/embedded_bridge.py)

    async def connect(self):
        # The origin check is config/asgi.py's AllowedHostsOriginValidator; here, who may look.
        if not await _may_see_board(self.scope.get("user")):
            await self.close()  # before accept: the handshake is refused with a 403
            return
        await self.channel_layer.group_add(BOARD_GROUP, self.channel_name)
        await self.accept()
        self.bridged = bridge_needed()
        if self.bridged:
            bridge().board_opened()
        seq = await database_sync_to_async(board_seq_current)()
        await self.send(text_data=json.dumps({"type": "hello", "seq": seq}))

    async def disconnect(self, code):
        if getattr(self, "bridged", False):
            bridge().board_closed()
        await self.channel_layer.group_discard(BOARD_GROUP, self.channel_name)

    async def receive(self, text_data=None, bytes_data=None):
        pass  # the board only listens; moves go through the HTTP view and its service

    async def board_tasks_changed(self, message):
        if self.bridged:
            bridge().pushed(message["task_ids"])
        await self.send(text_data=await board_message_text(message))
