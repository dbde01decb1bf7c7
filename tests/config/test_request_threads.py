"""HTTP requests under ASGI borrow a request thread and give it back: no thread per request."""

import threading

import pytest
from asgiref.sync import async_to_sync
from channels.testing import HttpCommunicator

from config.asgi import application, django_asgi_app
from config.speed.request_threads import RequestThreads

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_executor_given_back_is_lent_again_and_extras_are_stopped():
    threads = RequestThreads()
    first = threads.take()
    second = threads.take()
    assert first is not second
    threads.give_back(first)
    assert threads.take() is first

    threads.KEPT = 0
    threads.give_back(second)
    assert second._shutdown


def test_requests_in_turn_run_on_one_reused_thread():
    # given the HTTP app, and a record of the thread each request's middleware chain runs on
    idents = []
    seen = threading.Event()

    async def scenario():
        for _ in range(3):
            response = await HttpCommunicator(
                application, "GET", "/healthz", headers=[(b"host", b"localhost")]
            ).get_response()
            assert response["status"] == 200

    original = django_asgi_app.get_response

    def recording(request):
        idents.append(threading.get_ident())
        seen.set()
        return original(request)

    # when three requests come one after another
    django_asgi_app.get_response = recording
    try:
        async_to_sync(scenario)()
    finally:
        del django_asgi_app.get_response
    # then all three ran on one thread (asgiref would have started one for each)
    assert seen.is_set()
    assert len(set(idents)) == 1
