"""The runner's telemetry relay (client/.../runner/otlp_relay.py): an agent's OTLP exports are kept on
the runner's disk before they are answered and reach Switchyard's receiver once it answers, once.

Real processes: the app under uvicorn (this module's own, so a test can kill it and start it again
on the same port), real `switchyard runner` processes, and an agent (otel_agent.py) that exports
through the real OpenTelemetry SDK exporters configured by the environment the runner gives it.
"""

import errno
import gzip
import json
import os
import socket
import sys
import threading
from pathlib import Path

import httpx
import pytest
from django.db.models import Sum
from django.test import override_settings

from config.actors import Actor
from runners.services import run_queue
from sessions_app.keys import api_key_create, api_key_find, api_key_revoke
from switchyard_client.api.client import Client
from switchyard_client.runner import otlp_spool
from switchyard_client.runner.otlp_relay import OtlpRelay
from tests.browser.server import ServerProcess, free_port
from tests.factories import AgentFactory, SessionFactory, TaskFactory, UserFactory
from tests.runners import otel_agent
from tests.runners.live_runner import Machine, run_in, wait_for
from tests.usage import payloads as p
from tests.worker import FILE_ROOTS
from usage.models import UsageRecord

pytestmark = pytest.mark.usefixtures("transactional_db")

AGENT = Path(otel_agent.__file__)
SESSION = "0b9d7c6e-1f2a-4c3b-8d4e-5f6a7b8c9d0e"
JSON = "application/json"
PROTOBUF = "application/x-protobuf"


class Web:
    """The app on a fixed port that a test can kill (-9, as the issue's web kill) and start again."""

    def __init__(self, tmp_path_factory):
        base = tmp_path_factory.mktemp("relay-roots")
        self.roots = {name: base / name.lower() for name in FILE_ROOTS}
        for path in self.roots.values():
            path.mkdir()
        self.server = ServerProcess(tmp_path_factory.mktemp("relay-web") / "server.log")
        self.url = self.server.url

    def running(self) -> bool:
        return self.server.process is not None and self.server.process.poll() is None

    def start(self) -> None:
        with override_settings(**self.roots):
            self.server.start()

    def kill(self) -> None:
        self.server.process.kill()
        self.server.process.wait(10)
        self.server.log.close()


@pytest.fixture(scope="module")
def web_server(django_db_setup, django_db_blocker, tmp_path_factory):
    web = Web(tmp_path_factory)
    with django_db_blocker.unblock():
        web.start()
    yield web
    web.server.stop()


@pytest.fixture
def web(web_server):
    if not web_server.running():  # a test that failed while it was down
        web_server.start()
    return web_server


@pytest.fixture
def machines(tmp_path):
    made: list[Machine] = []

    def make(url: str, **kwargs) -> Machine:
        machine = Machine(tmp_path / "machines", url, f"relay-{len(made) + 1}", **kwargs)
        # The agent and the test signal each other through files of the test's: plain processes.
        machine.runner_table["sandbox"] = False
        machine.write()
        made.append(machine)
        return machine

    yield make
    for machine in made:
        machine.cleanup()


@pytest.fixture
def claude_key():
    """An agent key with a session of its own: what Claude Code exports with outside a run."""
    agent = AgentFactory(slug="claude-1")
    SessionFactory(agent=agent, id=SESSION, task=TaskFactory(title="Telemetry"))
    return api_key_create(agent=agent, scopes=["agent"]).key


def relay_url(machine: Machine) -> str:
    port_file = machine.root / "otlp-relay.port"
    port = wait_for(
        lambda: port_file.exists() and port_file.read_text().strip(), what="the relay's port", machines=[machine]
    )
    return f"http://127.0.0.1:{port}"


def spooled(root: Path) -> list[Path]:
    return sorted((root / "otlp-spool").glob("*.export"))


def post(url: str, path: str, body, *, key: str, media: str = JSON, **headers) -> httpx.Response:
    headers = {"Content-Type": media, "Authorization": f"Bearer {key}", **headers}
    return httpx.post(f"{url}{path}", content=body, headers=headers, timeout=10)


def tokens(**filters) -> tuple[int, int, int]:
    rows = UsageRecord.objects.filter(**filters)
    sums = rows.aggregate(i=Sum("input_tokens"), o=Sum("output_tokens"))
    return rows.count(), sums["i"] or 0, sums["o"] or 0


def test_exports_made_while_the_web_process_is_down_are_counted_once_it_is_back(web, machines, tmp_path):
    # Given a run whose agent exports its usage through the OpenTelemetry SDK, as Claude Code does
    ready, go, done = tmp_path / "ready", tmp_path / "go", tmp_path / "done"
    env = {"OTEL_AGENT_READY": str(ready), "OTEL_AGENT_GO": str(go), "OTEL_AGENT_DONE": str(done)}
    env["OTEL_AGENT_REQUESTS"] = "3"
    machine = machines(web.url, providers={"otel": {"command": [sys.executable, str(AGENT)], "env": env}})
    machine.start()
    person = Actor(user=UserFactory(username="po", is_staff=True))
    run = run_queue(actor=person, task=TaskFactory(title="Spend some tokens"), provider="otel")
    wait_for(ready.exists, timeout=60, what="the agent to start", machines=[machine])

    # When the web process is killed, and the agent reports its usage and exits meanwhile
    web.kill()
    go.touch()
    wait_for(done.exists, timeout=60, what="the agent's exports", machines=[machine])

    # Then its exporters were answered (by the runner: the server is away), and the exports are on disk
    assert json.loads(done.read_text()) == ["logs:SUCCESS", "traces:SUCCESS"]
    assert spooled(machine.root)

    # And once the web process is back, the run ends with every token attributed, once
    web.start()
    wait_for(lambda: run_in(run, "succeeded"), timeout=90, what="the run to succeed", machines=[machine])
    sent = (3 + 1, 3 * otel_agent.INPUT + otel_agent.SPAN_INPUT, 3 * otel_agent.OUTPUT + otel_agent.SPAN_OUTPUT)
    assert tokens(task_id=run.task_id) == sent
    assert tokens(session_id=run.session_id) == sent
    assert spooled(machine.root) == []


def test_exports_made_while_the_runner_is_down_are_counted_once_it_is_back(web, machines, tmp_path):
    # Given a run whose agent exports its usage through the OpenTelemetry SDK, as Claude Code does
    ready, go, done = tmp_path / "ready", tmp_path / "go", tmp_path / "done"
    env = {"OTEL_AGENT_READY": str(ready), "OTEL_AGENT_GO": str(go), "OTEL_AGENT_DONE": str(done)}
    env["OTEL_AGENT_REQUESTS"] = "2"
    machine = machines(web.url, providers={"otel": {"command": [sys.executable, str(AGENT)], "env": env}})
    first = machine.start()
    person = Actor(user=UserFactory(username="po", is_staff=True))
    run = run_queue(actor=person, task=TaskFactory(title="Outlive the runner"), provider="otel")
    wait_for(ready.exists, timeout=60, what="the agent to start", machines=[machine])

    # When the runner is killed, and the agent reports its usage and exits before it is back
    first.kill9()
    go.touch()
    wait_for(done.exists, timeout=60, what="the agent's exports", machines=[machine])

    # Then its exporters were answered (by the relay's keeper, which outlived the runner), and kept
    assert json.loads(done.read_text()) == ["logs:SUCCESS", "traces:SUCCESS"]
    assert spooled(machine.root)

    # And the runner started again finds the agent ended and delivers every token, once
    machine.start()
    wait_for(lambda: run_in(run, "succeeded"), timeout=90, what="the run to succeed", machines=[machine])
    sent = (2 + 1, 2 * otel_agent.INPUT + otel_agent.SPAN_INPUT, 2 * otel_agent.OUTPUT + otel_agent.SPAN_OUTPUT)
    assert tokens(session_id=run.session_id) == sent
    assert spooled(machine.root) == []


def test_an_export_delivered_twice_counts_once_for_every_signal(web, machines, claude_key):
    # Given a runner's relay
    machine = machines(web.url)
    machine.start()
    relay = relay_url(machine)
    records = [p.claude_api_request(SESSION, sequence=n, input_tokens=1000, output_tokens=100) for n in (1, 2)]
    logs = p.as_json(p.logs_json(*records))
    traces = p.traces_protobuf(p.gen_ai_spans(SESSION))
    metrics = p.as_json(_token_metrics(SESSION, 2000))

    # When the same exports reach it twice (an exporter's retry), in either encoding, gzipped or not,
    # and gzipped in chunks as Node's exporters stream it
    third = gzip.compress(p.as_json(p.logs_json(p.claude_api_request(SESSION, sequence=3, input_tokens=1000))))
    gzip_header = {"Content-Encoding": "gzip"}
    answers = [
        post(relay, "/v1/logs", logs, key=claude_key),
        post(relay, "/v1/logs", logs, key=claude_key),
        post(relay, "/v1/logs", gzip.compress(logs), key=claude_key, **gzip_header),
        post(relay, "/v1/logs", iter([third[:50], third[50:]]), key=claude_key, **gzip_header),
        post(relay, "/v1/logs", iter([third[:9], third[9:]]), key=claude_key, **gzip_header),
        post(relay, "/v1/logs", p.logs_protobuf(*records), key=claude_key, media=PROTOBUF),
        post(relay, "/v1/traces", traces, key=claude_key, media=PROTOBUF),
        post(relay, "/v1/traces", traces, key=claude_key, media=PROTOBUF),
        post(relay, "/v1/metrics", metrics, key=claude_key),
        post(relay, "/v1/metrics", metrics, key=claude_key),
    ]
    assert [(a.status_code, a.content) for a in answers] == [(200, b"{}")] * 5 + [(200, b"")] * 3 + [(200, b"{}")] * 2

    # Then all of them go to the server, which counts each record once: three requests, one chat span
    # (900 + 120 tokens) and one tool call; the metrics, which repeat the requests, add nothing
    wait_for(lambda: not spooled(machine.root), what="the relay to forward everything", machines=[machine])
    assert tokens(session_id=SESSION) == (5, 3 * 1000 + 900, 2 * 100 + 340 + 120)
    assert UsageRecord.objects.filter(session_id=SESSION, tool_name="get_weather").count() == 1


def test_a_killed_runner_started_again_with_the_same_root_forwards_what_it_had_spooled(web, machines, claude_key):
    # Given a runner whose server is away (nothing listens where its config points)
    machine = machines(f"http://127.0.0.1:{free_port()}")
    first = machine.start()
    relay = relay_url(machine)
    body = p.as_json(p.logs_json(p.claude_api_request(SESSION, input_tokens=4321, output_tokens=123)))

    # When an export reaches its relay, and the runner is killed the moment it answered
    answer = post(relay, "/v1/logs", body, key=claude_key)
    first.kill9()

    # Then the export was on disk before the answer, whole
    assert answer.status_code == 200
    [kept] = spooled(machine.root)
    assert kept.read_bytes().endswith(b"\n" + body)
    assert UsageRecord.objects.count() == 0

    # And the runner started again with the same root (now reaching the server) forwards it, on the
    # same port, where agents it re-adopts still export
    machine.runner_table["url"] = web.url
    machine.write()
    second = machine.start()
    wait_for(lambda: tokens(session_id=SESSION) == (1, 4321, 123), what="the spooled usage", machines=[machine])
    assert f"telemetry relay {relay}" in second.output()
    wait_for(lambda: not spooled(machine.root), what="the spool to empty", machines=[machine])


def test_an_export_from_an_earlier_attempt_goes_with_the_runs_current_key(web, tmp_path):
    # Given an export of run 7's first attempt, spooled by a runner whose server was away
    agent = AgentFactory(slug="claude@relay-1")
    SessionFactory(agent=agent, id=SESSION, task=TaskFactory(title="Resumed"))
    old = api_key_create(agent=agent, scopes=["agent"]).key
    first = OtlpRelay(
        tmp_path,
        api=_api(f"http://127.0.0.1:{free_port()}"),
        key_for_run=lambda run: old if run == 7 else None,
        run_for_key=lambda key: 7 if key == old else None,
        say=lambda message: None,
    )
    first.start()
    try:
        body = p.as_json(p.logs_json(p.claude_api_request(SESSION, input_tokens=777, output_tokens=77)))
        assert post(first.endpoint, "/v1/logs", body, key=old).status_code == 200
    finally:
        first.stop()

    # When the runner, started again, resumed the run as attempt 2: a new key, the old one revoked
    new = api_key_create(agent=agent, scopes=["agent"]).key
    api_key_revoke(api_key=api_key_find(key=old))
    said: list[str] = []
    second = OtlpRelay(
        tmp_path,
        api=_api(web.url),
        key_for_run=lambda run: new if run == 7 else None,
        run_for_key=lambda key: 7 if key == new else None,
        say=said.append,
    )
    second.start()
    try:
        settled = second.settle(7, stop=threading.Event())
    finally:
        second.stop()

    # Then the export was taken, under the run's current key
    assert settled
    assert tokens(session_id=SESSION) == (1, 777, 77)
    assert said == []


def test_an_export_the_server_refuses_is_dropped_and_the_next_one_still_goes(web, tmp_path, claude_key):
    said: list[str] = []
    relay = OtlpRelay(
        tmp_path, api=_api(web.url), key_for_run=lambda run: None, run_for_key=lambda key: None, say=said.append
    )
    relay.start()
    try:
        good = p.as_json(p.logs_json(p.claude_api_request(SESSION, input_tokens=10, output_tokens=1)))
        assert post(relay.endpoint, "/v1/logs", b'{"resourceLogs": "nope"}', key=claude_key).status_code == 200
        assert post(relay.endpoint, "/v1/logs", good, key=claude_key).status_code == 200
        wait_for(lambda: not spooled(tmp_path), what="the relay to forward both")
    finally:
        relay.stop()
    assert tokens(session_id=SESSION) == (1, 10, 1)
    assert len(said) == 1 and "dropped: Switchyard answered 400" in said[0]


def test_the_relay_answers_only_once_the_export_is_fsynced(tmp_path, monkeypatch):
    # Given a relay whose disk is slow: fsync waits until the test lets it go
    entered, release = threading.Event(), threading.Event()
    fsync = os.fsync

    def slow_fsync(fd: int) -> None:
        entered.set()
        assert release.wait(30)
        fsync(fd)

    monkeypatch.setattr(otlp_spool.os, "fsync", slow_fsync)
    relay = _relay_away(tmp_path)
    try:
        body = p.as_json(p.logs_json(p.claude_api_request(SESSION)))
        port = int(relay.endpoint.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            # When an export arrives
            sock.sendall(_request("/v1/logs", body))
            assert entered.wait(30)

            # Then while its file is not on disk nothing is answered (on loopback an answer already
            # sent would be in this socket's buffer now)
            sock.settimeout(None)  # with a timeout, Python waits for data before its recv
            with pytest.raises(BlockingIOError):
                sock.recv(1, socket.MSG_DONTWAIT)
            sock.settimeout(30)

            # And once it is, the export is answered, and kept
            release.set()
            assert _read_answer(sock).startswith(b"HTTP/1.1 200 ")
        [kept] = spooled(tmp_path)
        assert kept.read_bytes().endswith(b"\n" + body)
    finally:
        release.set()
        relay.stop()


def test_an_export_the_disk_would_not_take_is_not_answered_200(tmp_path, monkeypatch):
    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(otlp_spool.os, "fsync", full)
    relay = _relay_away(tmp_path)
    try:
        answer = post(relay.endpoint, "/v1/logs", p.as_json(p.logs_json()), key="sy_any")
    finally:
        relay.stop()
    assert answer.status_code == 503
    assert "could not keep the export" in answer.json()["message"]
    assert list((tmp_path / "otlp-spool").iterdir()) == []


def test_the_relay_refuses_what_the_server_would_refuse_without_keeping_it(tmp_path):
    relay = _relay_away(tmp_path)
    try:
        answers = [
            post(relay.endpoint, "/v1/spans", b"{}", key="sy_any"),
            post(relay.endpoint, "/v1/logs", b"{}", key="sy_any", media="text/plain"),
            post(relay.endpoint, "/v1/logs", b"{}", key="sy_any", **{"Content-Encoding": "br"}),
            httpx.post(f"{relay.endpoint}/v1/logs", content=b"{}", headers={"Content-Type": JSON}, timeout=10),
        ]
    finally:
        relay.stop()
    assert [a.status_code for a in answers] == [404, 415, 415, 401]
    assert "/v1/logs" in answers[0].json()["message"]
    assert spooled(tmp_path) == []


def test_a_relay_whose_old_port_is_taken_listens_on_another_and_drops_half_written_files(tmp_path):
    # Given a root whose relay listened on a port another program holds now, and a file a killed
    # runner was writing (never answered)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        (tmp_path / "otlp-relay.port").write_text(f"{taken}\n")
        (tmp_path / "otlp-spool").mkdir()
        (tmp_path / "otlp-spool" / ".tmp-00000000000000000001-1-00000001.export").write_bytes(b'{"signal"')

        # When the runner starts again
        relay = _relay_away(tmp_path)
        try:
            port = int(relay.endpoint.rsplit(":", 1)[1])
            answer = post(relay.endpoint, "/v1/logs", p.as_json(p.logs_json()), key="sy_any")
        finally:
            relay.stop()

    # Then it took another port, said so in the file, and kept no half-written export
    assert port != taken
    assert (tmp_path / "otlp-relay.port").read_text() == f"{port}\n"
    assert answer.status_code == 200
    assert [path.name.startswith(".tmp-") for path in (tmp_path / "otlp-spool").iterdir()] == [False]


def _relay_away(root: Path) -> OtlpRelay:
    """A relay whose server is away: what it takes stays in its spool."""
    relay = OtlpRelay(
        root,
        api=_api(f"http://127.0.0.1:{free_port()}"),
        key_for_run=lambda run: None,
        run_for_key=lambda key: None,
        say=lambda message: None,
    )
    relay.start()
    return relay


def _api(url: str) -> Client:
    """A runner's API client (its key is not what the relay forwards with)."""
    return Client(url, "sy_runner_key", timeout=10)


def _request(path: str, body: bytes) -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {JSON}\r\n"
        f"Authorization: Bearer sy_any\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode("ascii") + body


def _read_answer(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


def _token_metrics(session_id: str, value: int) -> dict:
    """Claude Code's claude_code.token.usage counter in the OTLP JSON mapping."""
    point = {
        "attributes": [
            {"key": "session.id", "value": {"stringValue": session_id}},
            {"key": "type", "value": {"stringValue": "input"}},
        ],
        "startTimeUnixNano": str(p.T0),
        "timeUnixNano": str(p.T0 + 60_000_000_000),
        "asDouble": value,
    }
    metric = {
        "name": "claude_code.token.usage",
        "unit": "tokens",
        "sum": {"dataPoints": [point], "aggregationTemporality": 1, "isMonotonic": True},
    }
    return {
        "resourceMetrics": [
            {
                "resource": {"attributes": p.CLAUDE_RESOURCE},
                "scopeMetrics": [{"scope": {"name": "com.anthropic.claude_code"}, "metrics": [metric]}],
            }
        ]
    }
