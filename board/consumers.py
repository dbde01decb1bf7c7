"""The board's websocket: every open board gets changed cards as OOB HTML.

To the client (JSON text frames):
- ``{"type": "hello", "seq": N}`` right after connecting: the last sequence number handed out;
- ``{"type": "tasks", "seq": N, "at": <epoch s of the commit>, "html": "<li id=task-.. hx-swap-oob=true>..
  <span id=count-..>", "removed": [ids]}`` after every committed change (board/live.py).
A client that sees a number other than last + 1, or reconnects, refetches the board.

Numbering, ordering and the one hub per process that renders each change once are the live-page
mechanism's (config/live.py); here, who may look, and how a change becomes a frame.
"""

import json

from channels.db import database_sync_to_async

from board.embedded_bridge import bridge_needed, task_table_watch
from board.live import BOARD_GROUP, board_cards_render
from config.live import LiveConsumer, LiveHub, live_hub
from config.pages import BOARD, user_may


@database_sync_to_async
def _may_see_board(user) -> bool:
    return user is not None and user.is_authenticated and user_may(user, BOARD)


# Not thread-sensitive: a render must not queue behind the HTTP views on the one shared thread.
def _render_sync(message: dict) -> str:
    frame = {"type": "tasks", "seq": message["seq"], "at": message.get("at")}
    return json.dumps({**frame, **board_cards_render(task_ids=message["task_ids"])})


_render = database_sync_to_async(_render_sync, thread_sensitive=False)


async def render(message: dict) -> str:
    return await _render(message)


def _companions() -> list:
    # The embedded default's in-memory layer lives in this process: changes the worker or a
    # command commit in other processes are found by the task-table watch (board/embedded_bridge.py).
    return [task_table_watch] if bridge_needed() else []


def board_hub() -> LiveHub:
    """This event loop's board hub."""
    return live_hub(BOARD_GROUP, render, _companions())


class BoardConsumer(LiveConsumer):
    live_render = staticmethod(render)

    async def live_topic(self) -> str | None:
        # The origin check is config/ws_origin.py's SameOriginValidator (scheme, host and port); here, who may look.
        return BOARD_GROUP if await _may_see_board(self.scope.get("user")) else None

    def live_companions(self) -> list:
        return _companions()
