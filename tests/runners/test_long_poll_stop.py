"""A web process that is stopping answers its long polls at once (config/process_stop.py), so Ctrl-C on
`make run` does not wait out a runner's 30-second poll: the poll loops themselves, and the real web
child of `manage.py serve` (config/http_server.py) stopped by SIGTERM while a runner's poll waits in it."""

import signal
import threading
import time

import httpx
import pytest

from config.actors import Actor
from config.process_stop import process_stop, process_stop_reset
from runners.dispatch import runner_next
from runners.services import runner_key_create
from sessions_app.models import StreamEvent
from sessions_app.permission_requests import input_request_wait
from tests.browser.server import ServerProcess
from tests.factories import SessionFactory, StreamEventFactory


@pytest.fixture
def stopping():
    process_stop()
    yield
    process_stop_reset()


@pytest.mark.django_db(transaction=True)
def test_a_runner_poll_answers_empty_at_once_when_the_process_stops(stopping):
    runner = runner_key_create(name="build-1")[0]

    started = time.monotonic()
    result = runner_next(actor=Actor(agent=runner.agent), runner=runner, wait=30)

    assert time.monotonic() - started < 2
    assert result.runs == [] and result.cancel == []


@pytest.mark.django_db(transaction=True)
def test_a_wait_for_a_persons_answer_ends_unanswered_at_once_when_the_process_stops(stopping):
    question = StreamEventFactory(
        session=SessionFactory(), type=StreamEvent.Type.INPUT_REQUEST, payload={"question": "Ship it?"}
    )

    started = time.monotonic()
    state = input_request_wait(question=question, wait=30)

    assert time.monotonic() - started < 2
    assert state.answer is None


@pytest.mark.django_db(transaction=True)
def test_sigterm_to_the_web_child_ends_a_waiting_runner_poll_and_the_process_at_once(tmp_path):
    issued = runner_key_create(name="build-1")[1]
    server = ServerProcess(tmp_path / "server.log").start()
    answers: list[httpx.Response] = []

    def poll() -> None:
        answers.append(
            httpx.post(
                f"{server.url}/api/v1/runners/me/next/",
                json={"wait": 30},
                headers={"Authorization": f"Bearer {issued.key}"},
                timeout=60,
            )
        )

    waiting = threading.Thread(target=poll)
    try:
        waiting.start()
        time.sleep(1.5)  # the poll is in the server, looking at the queue every 100 ms
        assert not answers
        started = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(timeout=25)
        stopped_in = time.monotonic() - started
        waiting.join(timeout=10)
    finally:
        server.stop()

    # Without the stop, uvicorn waited for the poll's 30 s before exiting.
    assert stopped_in < 10, f"the web child took {stopped_in:.1f} s to stop:\n{server.output()}"
    assert answers and answers[0].status_code == 200, server.output()
    assert answers[0].json()["runs"] == []
