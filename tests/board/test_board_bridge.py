"""Embedded default: a board sees task changes made by other processes (worker, commands).

With Redis the channel layer is shared and there is nothing to bridge; these tests are about the
in-memory layer, so they run where it is the one in use.
"""

import asyncio

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from django.utils import timezone

from board import consumers, embedded_bridge, services
from board.models import Task
from tests.board.board_helpers import product_owner
from tests.board.test_board_live import STAFF, _connected, _next_push
from tests.factories import TaskFactory

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif("not embedded_bridge.bridge_needed()", reason="Redis's channel layer is shared: no bridge"),
]


@pytest.fixture(autouse=True)
def quick_polls(monkeypatch):
    monkeypatch.setattr(embedded_bridge, "POLL_SECONDS", 0.05)


def _changed_elsewhere(task_id: int) -> None:
    # What the worker or a command does: a committed write that this process never pushed.
    Task.objects.filter(pk=task_id).update(title="Renamed by the sync worker", updated_at=timezone.now())


def test_a_change_committed_by_another_process_reaches_the_board():
    task = TaskFactory(title="Before")
    person = product_owner()

    async def scenario():
        board = await _connected(person)
        await database_sync_to_async(_changed_elsewhere)(task.pk)
        message = await _next_push(board)
        assert f'id="task-{task.pk}"' in message["html"]
        assert "Renamed by the sync worker" in message["html"]
        assert message["seq"] == board.hello_seq + 1
        # Pushed once: the next polls find nothing new.
        assert await board.receive_nothing(timeout=0.3)
        await board.disconnect()

    async_to_sync(scenario)()


def test_a_change_this_process_pushed_is_not_pushed_again():
    person = product_owner()

    async def scenario():
        board = await _connected(person)
        await database_sync_to_async(services.task_create)(actor=STAFF, title="Made here")
        first = await _next_push(board)
        assert "Made here" in first["html"]
        assert await board.receive_nothing(timeout=0.4)
        await board.disconnect()

    async_to_sync(scenario)()


def test_the_watch_stops_with_the_last_board():
    person = product_owner()

    async def scenario():
        board = await _connected(person)
        hub = consumers.board_hub()
        watches = [task for task in hub.tasks if task.get_coro().__name__ == "task_table_watch"]
        assert len(watches) == 1 and not watches[0].done()
        await board.disconnect()
        await asyncio.sleep(0)  # let the cancellation land
        assert hub.tasks == [] and watches[0].cancelled()

    async_to_sync(scenario)()
