"""The board's websocket: who may connect, and every committed task change pushed once, in order."""

import json

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.db import transaction
from django.test import Client

from board import services
from board.live import board_push_tasks
from board.models import Task
from board.moves import task_move
from board.sync import state_sync
from config.actors import Actor
from config.asgi import application
from tests.board.board_helpers import product_owner
from tests.board.test_sync_service import ORCHESTRATOR, SESSION, snapshot, write_file
from tests.factories import TaskFactory, UserFactory
from tests.worker import WS_TIMEOUT

pytestmark = pytest.mark.django_db(transaction=True)
ORIGIN = (b"origin", b"http://localhost")  # the origin of the Host below: config/ws_origin.py
HOST = (b"host", b"localhost")
STAFF = Actor(user=UserFactory.build(username="staff", is_staff=True))


def _cookie_for(user) -> tuple[bytes, bytes]:
    client = Client()
    client.force_login(user)
    return (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())


def _communicator(*headers) -> WebsocketCommunicator:
    return WebsocketCommunicator(application, "/ws/board/", headers=[HOST, *headers])


async def _connected(user) -> WebsocketCommunicator:
    cookie = await database_sync_to_async(_cookie_for)(user)
    communicator = _communicator(ORIGIN, cookie)
    connected, _ = await communicator.connect(timeout=WS_TIMEOUT)
    assert connected
    hello = json.loads(await communicator.receive_from(timeout=WS_TIMEOUT))
    assert hello["type"] == "hello"
    communicator.hello_seq = hello["seq"]
    return communicator


async def _next_push(communicator) -> dict:
    message = json.loads(await communicator.receive_from(timeout=WS_TIMEOUT))
    assert message["type"] == "tasks"
    return message


def test_anonymous_is_refused():
    async def scenario():
        connected, _ = await _communicator(ORIGIN).connect(timeout=WS_TIMEOUT)
        assert not connected

    async_to_sync(scenario)()


def test_a_user_outside_the_board_groups_is_refused():
    cookie = _cookie_for(UserFactory(username="outsider"))

    async def scenario():
        connected, _ = await _communicator(ORIGIN, cookie).connect(timeout=WS_TIMEOUT)
        assert not connected

    async_to_sync(scenario)()


def test_a_wrong_origin_is_refused_even_with_a_good_session():
    cookie = _cookie_for(product_owner())

    async def scenario():
        connected, _ = await _communicator((b"origin", b"http://evil.example"), cookie).connect(timeout=WS_TIMEOUT)
        assert not connected

    async_to_sync(scenario)()


def test_a_task_change_through_the_service_pushes_the_rendered_card_with_a_seq():
    person = product_owner()

    async def scenario():
        board = await _connected(person)
        task = await database_sync_to_async(services.task_create)(actor=STAFF, title="Pushed card", priority="P1")
        message = await _next_push(board)
        assert message["seq"] == board.hello_seq + 1
        assert f'id="task-{task.pk}"' in message["html"] and "Pushed card" in message["html"]
        assert 'hx-swap-oob="true"' in message["html"]
        assert 'id="count-ready"' in message["html"] and message["removed"] == []
        assert await board.receive_nothing(timeout=0.2)
        await board.disconnect()

    async_to_sync(scenario)()


def test_a_rolled_back_change_sends_nothing():
    person = product_owner()

    def change_then_roll_back():
        with pytest.raises(RuntimeError), transaction.atomic():
            services.task_create(actor=STAFF, title="Never")
            raise RuntimeError("rolled back")

    async def scenario():
        board = await _connected(person)
        await database_sync_to_async(change_then_roll_back)()
        assert await board.receive_nothing(timeout=0.3)
        assert not await database_sync_to_async(Task.objects.exists)()
        await board.disconnect()

    async_to_sync(scenario)()


def test_one_transaction_sends_one_message_and_seq_increments_by_one():
    person = product_owner()
    ready = TaskFactory(title="ready")

    @transaction.atomic
    def two_changes():
        services.task_create(actor=STAFF, title="one")
        services.task_create(actor=STAFF, title="two")
        board_push_tasks(task_ids=[ready.pk])

    async def scenario():
        board = await _connected(person)
        await database_sync_to_async(two_changes)()
        first = await _next_push(board)
        assert first["html"].count('class="task-card') == 3
        await database_sync_to_async(task_move)(actor=Actor(user=person), task_id=ready.pk, status="done")
        second = await _next_push(board)
        assert second["seq"] == first["seq"] + 1 == board.hello_seq + 2
        assert 'data-status="done"' in second["html"]
        assert await board.receive_nothing(timeout=0.2)
        await board.disconnect()

    async_to_sync(scenario)()


def test_every_open_board_gets_the_same_message():
    async def scenario():
        first = await _connected(await database_sync_to_async(product_owner)("po1"))
        second = await _connected(await database_sync_to_async(product_owner)("po2"))
        await database_sync_to_async(services.task_create)(actor=STAFF, title="Both")
        assert await _next_push(first) == await _next_push(second)
        await first.disconnect()
        await second.disconnect()

    async_to_sync(scenario)()


def test_the_admin_release_action_and_a_deleted_task_push(agent):
    staff = UserFactory(username="admin", is_staff=True, is_superuser=True)
    task = TaskFactory(title="Held")
    unclaimed = TaskFactory(title="Never claimed")  # a task with claims keeps them: the admin won't delete it
    services.task_claim(actor=Actor(agent=agent), agent=agent, task=task)
    admin = Client()
    admin.force_login(staff)

    def release():
        data = {"action": "release_claims", "_selected_action": [task.pk]}
        assert admin.post("/admin/board/task/", data).status_code == 302

    def delete():
        assert admin.post(f"/admin/board/task/{unclaimed.pk}/delete/", {"post": "yes"}).status_code == 302

    async def scenario():
        board = await _connected(staff)
        await database_sync_to_async(release)()
        message = await _next_push(board)
        assert f'id="task-{task.pk}"' in message["html"] and 'data-status="ready"' in message["html"]
        await database_sync_to_async(delete)()
        message = await _next_push(board)
        assert message["removed"] == [unclaimed.pk]
        await board.disconnect()

    async_to_sync(scenario)()


def test_a_sync_write_pushes_the_synced_tasks():
    person = product_owner()
    write_file(f"{SESSION}/orchestrator.json", json.dumps(ORCHESTRATOR))
    snapshot("backend", {"task": "Build the API", "status": "running"})

    async def scenario():
        board = await _connected(person)
        await database_sync_to_async(state_sync)()
        message = await _next_push(board)
        assert "Build the API" in message["html"]
        await board.disconnect()

    async_to_sync(scenario)()


def test_a_session_waiting_for_input_pushes_its_task_card_with_the_badge():
    from sessions_app.models import AgentSession
    from sessions_app.services import session_transition
    from tests.factories import AgentFactory, SessionFactory

    person = product_owner()
    agent = AgentFactory(slug="waiter")
    session = SessionFactory(agent=agent, status=AgentSession.Status.RUNNING)
    task = TaskFactory(title="Needs a decision", status="in_progress", assignee=agent, session=session)
    actor = Actor(agent=agent)

    async def scenario():
        board = await _connected(person)
        await database_sync_to_async(session_transition)(
            actor=actor, session=session, status=AgentSession.Status.WAITING_FOR_INPUT
        )
        waiting = await _next_push(board)
        assert f'id="task-{task.pk}"' in waiting["html"] and "Waiting for input" in waiting["html"]
        await database_sync_to_async(session_transition)(actor=actor, session=session, status="running")
        running = await _next_push(board)
        assert f'id="task-{task.pk}"' in running["html"] and "Waiting for input" not in running["html"]
        await board.disconnect()

    async_to_sync(scenario)()
