"""Retries: backoff honouring Retry-After, and a retried write that reuses its client id, so the
server holds one row even when the first answer was lost after the row was stored."""

import httpx
import pytest

from ledger.models import ToolInvocation
from sessions_app.models import StreamEvent
from switchyard_client.api.client import Client
from switchyard_client.api.errors import ConnectionFailed, ServerError
from switchyard_client.api.retry import RetryPolicy, send_with_retry
from tests.client.live import FAST_RETRY


class LoseFirstAnswer(httpx.BaseTransport):
    """Forwards every request to the real server, but throws away the first answer to a write and
    raises a read timeout instead, as a dropped connection would after the server stored the row."""

    def __init__(self):
        self.inner = httpx.HTTPTransport()
        self.bodies: list[bytes] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.read()
        response = self.inner.handle_request(request)
        if request.method == "GET":
            return response
        self.bodies.append(request.content)
        if len(self.bodies) == 1:
            response.read()
            response.close()
            raise httpx.ReadTimeout("answer lost", request=request)
        return response


def test_a_retried_event_reuses_its_client_id_and_is_stored_once(sy, sy_server, agent_key):
    sid = sy.session_open(id="sess-retry", intent="retry", status="running")["id"]
    transport = LoseFirstAnswer()

    with Client(sy_server.url, agent_key, retry=FAST_RETRY, transport=transport) as flaky:
        stored = flaky.event_append(sid, "log", {"line": "once"})

    assert len(transport.bodies) == 2
    assert transport.bodies[0] == transport.bodies[1]  # same body, same client id
    assert StreamEvent.objects.filter(session_id=sid, type="log").count() == 1
    assert StreamEvent.objects.get(session_id=sid, type="log").client_id == stored["client_id"]


def test_a_retried_batch_of_tool_calls_is_stored_once(sy, sy_server, agent_key):
    sid = sy.session_open(id="sess-retry-tools", intent="retry", status="running")["id"]
    transport = LoseFirstAnswer()

    with Client(sy_server.url, agent_key, retry=FAST_RETRY, transport=transport) as flaky:
        answer = flaky.tool_calls_record(
            sid, [{"tool_name": "Bash", "input": {"command": f"ls {n}"}} for n in range(5)]
        )

    assert transport.bodies[0] == transport.bodies[1]
    assert answer["stored"] == 5
    assert {r["status"] for r in answer["results"]} == {200}  # the retry was answered with the stored rows
    assert ToolInvocation.objects.filter(session_id=sid).count() == 5


def test_claim_next_is_not_retried_after_a_lost_answer(sy, sy_server, agent_key):
    transport = LoseFirstAnswer()

    with (
        Client(sy_server.url, agent_key, retry=FAST_RETRY, transport=transport) as flaky,
        pytest.raises(ConnectionFailed),
    ):
        flaky.task_claim_next()

    assert len(transport.bodies) == 1


def scripted(*answers):
    """A transport answering from a script: a status, or an exception to raise."""
    seen = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = answers[len(seen) - 1]
        if isinstance(answer, Exception):
            raise answer
        status, headers = answer
        return httpx.Response(status, headers=headers, json={"message": f"answer {status}", "slug": "a"})

    return httpx.MockTransport(handle), seen


def test_429_waits_for_retry_after_then_succeeds():
    sleeps = []
    transport, seen = scripted((429, {"Retry-After": "2"}), (503, {}), (200, {}))
    with httpx.Client(transport=transport, base_url="http://x") as http:
        response = send_with_retry(
            lambda: http.get("/"), policy=RetryPolicy(base_delay=0.1), idempotent=True, sleep=sleeps.append
        )

    assert response.status_code == 200
    assert len(seen) == 3
    assert sleeps[0] == 2.0
    assert 0.05 <= sleeps[1] <= 0.2  # backoff with jitter for the 503


def test_connect_errors_are_retried_then_reported():
    sleeps = []
    transport, seen = scripted(*[httpx.ConnectError("refused")] * 3)
    with httpx.Client(transport=transport, base_url="http://x") as http, pytest.raises(httpx.ConnectError):
        send_with_retry(lambda: http.post("/"), policy=RetryPolicy(attempts=3), idempotent=False, sleep=sleeps.append)

    assert len(seen) == 3
    assert len(sleeps) == 2


def test_a_5xx_after_every_attempt_is_a_server_error():
    transport, seen = scripted(*[(502, {})] * 3)
    client = Client("http://x", "sy_k", transport=transport, retry=RetryPolicy(attempts=3, base_delay=0.001))

    with pytest.raises(ServerError) as error:
        client.agent_me()

    assert error.value.status == 502
    assert len(seen) == 3
