"""A finished request leaves nothing for the cyclic garbage collector (config/speed/request_cycles.py).

Each request used to leave its request, DRF view, response and about a hundred objects more in
reference cycles; the collector's passes over them stalled the workers (bench/HISTORY.md).
"""

import gc
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from asgiref.testing import ApplicationCommunicator
from django.http import HttpRequest, HttpResponseBase
from rest_framework.request import Request
from rest_framework.views import APIView

import config.speed.asgi_handler
from board.models import Task
from config.asgi import application

# The checks below read the collector's whole state, which earlier tests in the same process can
# disturb (after the Playwright tests, a finished request stays reachable from outside the
# handler and nothing reaches the collector, with or without the unlinking). So they run in a
# fresh pytest process, started by the one test that is not skipped here.
FRESH = os.environ.get("SWITCHYARD_FRESH_GC_CHECK") == "1"
fresh_only = pytest.mark.skipif(not FRESH, reason="run in a fresh process by test_in_a_fresh_process")
pytestmark = pytest.mark.django_db(transaction=True)

REQUEST_OBJECTS = (HttpRequest, HttpResponseBase, Request, APIView)
SETTLE_SECONDS = 2.0
# Hang guards, not timings: the fresh process takes about 10 s alone, 3 of them its first test's
# setup (migrations), and took 75 s beside both suites on a 2-core machine.
CHILD_TEST_DEADLINE = 240
CHILD_DEADLINE = 540


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
        # The request's thread may hold its last references a moment after the answer is out; only
        # then does what it leaves become garbage. Look until some shows up, or for SETTLE_SECONDS.
        deadline = time.monotonic() + SETTLE_SECONDS
        while True:
            gc.collect()
            left = [obj for obj in gc.garbage if isinstance(obj, REQUEST_OBJECTS)]
            if left or time.monotonic() > deadline:
                break
            time.sleep(0.05)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    return response, left


@fresh_only
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


@fresh_only
def test_without_the_unlinking_the_same_request_leaves_cycles(agent_client, monkeypatch):
    # given the handler without break_request_cycles (shows the check above can fail)
    monkeypatch.setattr(config.speed.asgi_handler, "break_request_cycles", lambda request, response: None)
    Task.objects.create(title="Write the report", status=Task.Status.READY)
    # when the same claim is served
    response, left = _served_with_garbage("POST", "/api/v1/tasks/claim-next/", agent_client.key)
    # then its request, view and response were only freeable by the collector
    assert response["status"] == 200
    kinds = {type(obj).__name__ for obj in left}
    assert {"ASGIRequest", "Request", "TaskClaimNextView", "Response"} <= kinds


@fresh_only
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


@pytest.mark.skipif(FRESH, reason="this is the fresh process")
@pytest.mark.timeout(CHILD_DEADLINE + 60)
def test_in_a_fresh_process():
    # when this module's checks run in a process of their own, on a database of their own
    # Not a pytest-xdist worker: config/settings/test.py would give it the next worker's Redis database
    # (cleared between that worker's tests); it shares its parent's, which waits for it meanwhile.
    env = {name: value for name, value in os.environ.items() if name != "PYTEST_XDIST_WORKER"}
    env |= {"SWITCHYARD_FRESH_GC_CHECK": "1", "TEST_DB_SUFFIX": os.environ.get("TEST_DB_SUFFIX", "") + "_gc"}
    # Each child test has a deadline of its own, well inside this one's: a child that hangs then
    # reports where (pytest-timeout's stacks, in its output below) rather than leaving a bare timeout.
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", f"timeout={CHILD_TEST_DEADLINE}"]
    try:
        done = subprocess.run(
            [*command, __file__],
            cwd=Path(__file__).resolve().parents[2],
            env=env,
            capture_output=True,
            text=True,
            timeout=CHILD_DEADLINE,
        )
    except subprocess.TimeoutExpired as stopped:
        # What it had printed comes as bytes even in text mode (subprocess keeps the raw buffer).
        printed = b"\n".join(part or b"" for part in (stopped.stdout, stopped.stderr))
        pytest.fail(f"the fresh process ran past {CHILD_DEADLINE} s:\n{printed.decode(errors='replace')[-5000:]}")
    # then all three passed (none skipped, none failed)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "3 passed, 1 skipped" in done.stdout, done.stdout[-3000:]
