"""EventBatcher: flushes at size, on a timer and at exit; a 207 keeps the good items and reports the rest."""

import subprocess
import sys
import textwrap
import time

import pytest

from ledger.models import ToolInvocation
from sessions_app.models import StreamEvent
from switchyard_client.api.batching import EventBatcher

pytestmark = pytest.mark.django_db(transaction=True)


def logs(sid: str) -> list[dict]:
    return list(
        StreamEvent.objects.filter(session_id=sid, type="log").order_by("seq").values_list("payload", flat=True)
    )


def test_flushes_when_the_buffer_reaches_max_items(sy):
    sid = sy.session_open(id="sess-size", intent="batch", status="running")["id"]
    batcher = EventBatcher(sy, sid, max_items=3, interval=None, register_atexit=False)

    for n in range(5):
        batcher.event("log", {"n": n})
    after_five = logs(sid)
    batcher.close()

    assert after_five == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert logs(sid) == [{"n": n} for n in range(5)]
    assert batcher.stats.requests == 2
    assert batcher.pending() == 0


def test_flushes_on_the_timer_and_sends_tool_calls_too(sy):
    sid = sy.session_open(id="sess-timer", intent="batch", status="running")["id"]

    with EventBatcher(sy, sid, max_items=100, interval=0.1, register_atexit=False) as batcher:
        batcher.event("log", {"n": 1})
        batcher.tool_call("Bash", {"command": "ls"}, status="success", output={"stdout": "a"})
        deadline = time.monotonic() + 5
        while batcher.pending() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert batcher.pending() == 0

    assert logs(sid) == [{"n": 1}]
    assert ToolInvocation.objects.get(session_id=sid).status == "success"


def test_a_207_stores_the_good_items_and_keeps_the_refused_ones(sy):
    sid = sy.session_open(id="sess-207", intent="batch", status="running")["id"]

    with EventBatcher(sy, sid, interval=None, register_atexit=False) as batcher:
        batcher.event("log", {"n": 1})
        batcher.event("not-a-type", {"n": 2})
        batcher.event("log", {"n": 3})

    assert logs(sid) == [{"n": 1}, {"n": 3}]
    assert batcher.stats.sent == 2
    [rejected] = batcher.rejected
    assert (rejected.status, rejected.item["payload"]) == (400, {"n": 2})
    assert "type" in rejected.errors


def test_flushes_at_interpreter_exit(sy, sy_server, agent_key):
    sid = sy.session_open(id="sess-exit", intent="batch", status="running")["id"]
    script = textwrap.dedent(
        f"""
        from switchyard_client import Client, EventBatcher
        batcher = EventBatcher(Client({sy_server.url!r}, {agent_key!r}), {sid!r}, max_items=1000, interval=60)
        for n in range(250):
            batcher.event("log", {{"n": n}})
        # no flush, no close: atexit sends them
        """
    )

    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)

    assert done.returncode == 0, done.stderr
    assert logs(sid) == [{"n": n} for n in range(250)]
