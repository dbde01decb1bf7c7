"""The board hub sends changes to its boards in sequence order, whatever order they arrived in.

The hub is the live-page mechanism's (config/live.py): one per process and topic, the board's
being the one for BOARD_GROUP."""

import asyncio

import pytest

from board.live import BOARD_GROUP
from config.live import LiveHub


class Board:
    def __init__(self) -> None:
        self.frames: list[str] = []

    async def send(self, text_data: str) -> None:
        self.frames.append(text_data)


@pytest.fixture
def hub():
    async def render(message):
        return str(message["seq"])

    return lambda: LiveHub(BOARD_GROUP, render)


def _run(hub_class, feed, *, settle: float):
    """A hub with one board and its delivery running; ``feed(arrived, board)`` puts messages in.
    Returns what ``feed`` returned and the frames the board got by ``settle`` seconds later."""

    async def scenario():
        hub = hub_class()
        board = Board()
        hub.pages.add(board)
        arrived: asyncio.Queue = asyncio.Queue()
        deliver = asyncio.ensure_future(hub._deliver(arrived))
        fed = await feed(arrived, board)
        await asyncio.sleep(settle)
        deliver.cancel()
        return fed, board.frames

    return asyncio.run(scenario())


def _deliver(hub_class, seqs: list[int], *, settle: float = 0.2) -> list[str]:
    async def feed(arrived, board):
        for seq in seqs:
            arrived.put_nowait({"seq": seq, "task_ids": [seq]})

    return _run(hub_class, feed, settle=settle)[1]


def test_changes_that_arrive_out_of_order_are_sent_in_order(hub):
    assert _deliver(hub, [1, 3, 2, 5, 4]) == ["1", "2", "3", "4", "5"]


def test_a_number_that_never_comes_is_given_up_after_the_hold(hub):
    # 3 never arrives: 4 and 5 go out after the hold, and the boards see the gap themselves.
    assert _deliver(hub, [1, 2, 4, 5], settle=LiveHub.HOLD_SECONDS * 4) == ["1", "2", "4", "5"]


def test_a_number_from_before_is_sent_at_once(hub):
    # A restarted Redis counts from 1 again: no holding back behind numbers that will never come.
    assert _deliver(hub, [7, 8, 1, 2]) == ["7", "8", "1", "2"]


def test_changes_that_keep_arriving_do_not_extend_the_hold(hub):
    async def feed(arrived, board):
        arrived.put_nowait({"seq": 1, "task_ids": [1]})
        # 2 never comes; 3, 4, ... keep arriving faster than the hold
        sent_by_then = None
        for seq in range(3, 20):
            arrived.put_nowait({"seq": seq, "task_ids": [seq]})
            await asyncio.sleep(LiveHub.HOLD_SECONDS / 4)
            if seq == 15:
                sent_by_then = list(board.frames)
        return sent_by_then

    sent_by_then, frames = _run(hub, feed, settle=LiveHub.HOLD_SECONDS * 2)
    assert "3" in sent_by_then  # let go after one hold, not after the stream stopped
    assert frames == [str(seq) for seq in [1, *range(3, 20)]]
