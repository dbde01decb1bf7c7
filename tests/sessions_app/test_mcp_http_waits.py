"""One agent's waits cannot stall /mcp for the others (issue 24): 45 ``ask_product_owner`` calls
waiting for an answer held anyio's 40 worker threads, so another agent's ``initialize`` waited for
one of them to end. A wait now holds no worker thread (it sleeps on the event loop and polls in a
limiter of its own), and one key has at most MCP_WAITS_PER_KEY waits at once.

Against the real server (uvicorn, as in production), with real concurrent HTTP requests. The tests
assert on order (the initialize answers while every wait is still pending), never on durations."""

import json
import queue
import threading

import httpx
import pytest

from config.actors import Actor
from sessions_app.input_requests import session_answer_input
from sessions_app.keys import api_key_create
from sessions_app.models import AgentSession, StreamEvent
from tests.browser.server import module_server
from tests.factories import AgentFactory, UserFactory
from tests.worker import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

WAITS = 40  # anyio's default thread limiter: the number of waits that stalled the server before
HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "MCP-Protocol-Version": "2025-11-25",
}


@pytest.fixture(scope="module")
def live(django_db_setup, django_db_blocker, tmp_path_factory):
    server = module_server(django_db_blocker, tmp_path_factory, "mcp-waits")
    yield server
    server.stop()


def _mcp(url: str, key: str, method: str, params: dict) -> dict:
    """One JSON-RPC request to /mcp (stateless Streamable HTTP): its result, or its error."""
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    response = httpx.post(
        f"{url}/mcp",
        json=body,
        headers={**HEADERS, "Authorization": f"Bearer {key}"},
        timeout=httpx.Timeout(30, read=300),
    )
    assert response.status_code == 200, response.text
    if response.headers["content-type"].startswith("text/event-stream"):
        data = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
        messages = [json.loads(item) for item in data if item.strip()]
        return next(m for m in messages if m.get("id") == 1)
    return response.json()


def _ask(url: str, key: str, question: str, wait_seconds: float) -> dict:
    return _mcp(
        url,
        key,
        "tools/call",
        {"name": "ask_product_owner", "arguments": {"question": question, "wait_seconds": wait_seconds}},
    )["result"]


def _initialize(url: str, key: str) -> dict:
    params = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "newcomer", "version": "1"},
    }
    return _mcp(url, key, "initialize", params)


def _questions() -> int:
    return StreamEvent.objects.filter(type=StreamEvent.Type.INPUT_REQUEST, payload__has_key="question").count()


def test_another_agents_initialize_answers_while_every_wait_is_pending(live):
    keys = [api_key_create(agent=AgentFactory(slug=f"asker-{n}")).key for n in range(WAITS)]
    newcomer = api_key_create(agent=AgentFactory(slug="newcomer")).key
    person = Actor(user=UserFactory(is_staff=True))
    done: queue.Queue = queue.Queue()
    answers: dict[int, dict] = {}

    def ask(n: int) -> None:
        answers[n] = _ask(live.url, keys[n], f"Question {n}?", 300)
        done.put(("answered", n))

    def initialize() -> None:
        done.put(("initialized", _initialize(live.url, newcomer)))

    askers = [threading.Thread(target=ask, args=(n,), daemon=True) for n in range(WAITS)]
    for thread in askers:
        thread.start()
    # Every session waiting for input: each ask posted its question and is in its wait (before issue 24,
    # each in a worker thread).
    waiting = AgentSession.objects.filter(status=AgentSession.Status.WAITING_FOR_INPUT)
    wait_for(lambda: waiting.count() == WAITS, timeout=120, message=f"{WAITS} sessions waiting for input")
    threading.Thread(target=initialize, daemon=True).start()

    first = done.get(timeout=120)

    assert first[0] == "initialized", first
    assert first[1]["result"]["serverInfo"]["name"] == "switchyard"
    assert done.empty() and not answers  # no wait had ended
    # Then a person answers each: every wait ends with its own answer.
    for session in waiting.select_related("agent"):
        session_answer_input(actor=person, session=session, answer=f"Yes, {session.agent.slug}.")
    for thread in askers:
        thread.join(120)
    assert sorted(answers) == list(range(WAITS))
    assert {n: answers[n]["structuredContent"]["answer"] for n in range(WAITS)} == {
        n: f"Yes, asker-{n}." for n in range(WAITS)
    }


def test_one_key_has_at_most_four_waits_at_once(live):
    agent = AgentFactory(slug="eager")
    key = api_key_create(agent=agent).key
    other = api_key_create(agent=AgentFactory(slug="patient")).key
    results: list[dict] = []
    waiting = [
        threading.Thread(target=lambda n=n: results.append(_ask(live.url, key, f"Q{n}?", 30)), daemon=True)
        for n in range(4)
    ]
    for thread in waiting:
        thread.start()
    wait_for(lambda: _questions() == 4, timeout=120, message="four questions")

    fifth = _ask(live.url, key, "One more?", 30)
    at_once = _ask(live.url, key, "Without waiting?", 0)  # a call that does not wait takes no slot
    others = _ask(live.url, other, "Mine?", 0)

    assert fifth["isError"] is True
    assert fifth["content"][0]["text"] == (
        "Error executing tool ask_product_owner: This key already has 4 ask_product_owner calls waiting for an answer, the most at once "
        "(MCP_WAITS_PER_KEY): ask with wait_seconds 0 and use check_answer, or wait for one to end."
    )
    assert not results  # the four were still waiting
    assert (at_once.get("isError"), others.get("isError")) == (False, False)
    assert _questions() == 6  # the refused call posted nothing
    for thread in waiting:
        thread.join(120)
    assert [r["structuredContent"]["answered"] for r in results] == [False] * 4
