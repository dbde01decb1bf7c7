"""A finished request leaves nothing for the cyclic garbage collector (config/asgi.py).

Each request used to leave its request, DRF view, response and about a hundred objects more in
reference cycles; the collector's passes over them stalled the workers (bench/README.md).
"""

import gc

import pytest
from asgiref.sync import async_to_sync
from asgiref.testing import ApplicationCommunicator
from django.http import HttpRequest, HttpResponseBase
from rest_framework.request import Request
from rest_framework.views import APIView

import config.asgi
from board.models import Task
from config.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)

REQUEST_OBJECTS = (HttpRequest, HttpResponseBase, Request, APIView)


async def _serve(method: str, path: str, headers: list) -> dict:
    """One request through the ASGI app, read to the end of its body (streamed or not)."""
    scope = {"type": "http", "http_version": "1.1", "method": method, "path": path, "query_string": b""}
    communicator = ApplicationCommunicator(application, scope | {"headers": headers})
    await communicator.send_input({"type": "http.request", "body": b""})
    start = await communicator.receive_output(5)
    body = b""
    while True:
        message = await communicator.receive_output(5)
        body += message.get("body", b"")  # the last message of a stream may have no body
        if not message.get("more_body"):
            break
    await communicator.wait(5)
    return {"status": start["status"], "body": body}


def _served_with_garbage(method: str, path: str, key: str, headers=()) -> tuple[dict, list]:
    """Serve one request through the ASGI app; return the response and what only the collector would free."""
    headers = [(b"host", b"localhost"), (b"authorization", f"Bearer {key}".encode()), *headers]
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)  # the collector keeps what it would have freed in gc.garbage
    try:
        response = async_to_sync(_serve)(method, path, headers)
        gc.collect()
        left = [obj for obj in gc.garbage if isinstance(obj, REQUEST_OBJECTS)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    return response, left


def test_an_api_request_is_freed_by_reference_counting(agent_client):
    # given a ready task
    task = Task.objects.create(title="Write the report", status=Task.Status.READY)
    # when an agent claims it through the ASGI app
    response, left = _served_with_garbage("POST", "/api/v1/tasks/claim-next/", agent_client.key)
    # then the claim was answered in full, and no request object waited for the collector
    assert response["status"] == 200, response["body"][:300]
    assert b'"id":%d' % task.pk in response["body"]
    assert b'"assignee":"claude-1"' in response["body"]
    assert left == []


def test_without_the_unlinking_the_same_request_leaves_cycles(agent_client, monkeypatch):
    # given the handler without break_request_cycles (shows the check above can fail)
    monkeypatch.setattr(config.asgi, "break_request_cycles", lambda request, response: None)
    Task.objects.create(title="Write the report", status=Task.Status.READY)
    # when the same claim is served
    response, left = _served_with_garbage("POST", "/api/v1/tasks/claim-next/", agent_client.key)
    # then its request, view and response were only freeable by the collector
    assert response["status"] == 200
    kinds = {type(obj).__name__ for obj in left}
    assert {"ASGIRequest", "Request", "TaskClaimNextView", "Response"} <= kinds


def test_a_streamed_download_is_answered_whole_after_the_unlinking(agent_client):
    # given a file in a session's work products
    session_id = agent_client.post("/api/v1/sessions/", {"intent": "write"}, format="json").json()["id"]
    url = f"/api/v1/sessions/{session_id}/files/work_products/data.bin"
    put = agent_client.put(url, data=bytes(range(100)), content_type="application/octet-stream")
    assert put.status_code == 201
    # when a range of it is read through the ASGI app (a streamed response)
    response, left = _served_with_garbage("GET", url, agent_client.key, headers=[(b"range", b"bytes=10-19")])
    # then the range arrived whole: the request was unlinked only after the stream was sent
    assert response["status"] == 206
    assert response["body"] == bytes(range(10, 20))
    # A streamed response is not a DRF Response, so nothing on it leads to the DRF view, and the
    # view's own cycle stays for the collector: one per download, not on the API's hot paths.
    assert {type(obj).__name__ for obj in left} <= {
        "SessionFileView",
        "Request",
        "ASGIRequest",
        "StreamingHttpResponse",
    }
