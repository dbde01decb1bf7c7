"""The runner points the agents it starts at its telemetry relay (client/src/switchyard_client/runner/agent_env.py,
through ``RunWorker._spawn``; the relay is otlp_relay.py), with the run's own key, unless the provider's env says
otherwise; and a run's end waits for its exports to reach the server (its end revokes their key)."""

import os
import threading
from types import SimpleNamespace

import pytest

from switchyard_client.runner import worker
from switchyard_client.runner.config import ProviderConfig
from switchyard_client.runner.state import RunState
from switchyard_client.runner.worker import RunWorker

RELAY = "http://127.0.0.1:41999"


class _Store:
    def __init__(self, folder):
        self.folder = folder

    def save(self, state):
        pass


def _spawned_env(tmp_path, monkeypatch, *, url: str, provider_env: dict) -> dict:
    seen = {}

    def fake_spawn(argv, *, cwd, env, log_path, exit_path, **_):
        seen.update(env)
        return SimpleNamespace(pid=os.getpid())

    monkeypatch.setattr(worker, "spawn", fake_spawn)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://the-runners-own-collector:4318")
    provider = ProviderConfig(name="claude", command=["claude", "-p", "{prompt}"], env=provider_env)
    runner = SimpleNamespace(
        config=SimpleNamespace(url=url, sandbox=False),  # the environment is what is looked at
        providers={"claude": provider},
        jobs=tmp_path,
        store=_Store(tmp_path),
        console=SimpleNamespace(say=lambda message: None),
        relay=SimpleNamespace(endpoint=RELAY),
    )
    state = RunState(
        id=7, attempt=1, provider="claude", session="run-7", agent_key="sy_abc_run7", workdir=str(tmp_path)
    )
    state.assignment = {"task": {"id": 3, "title": "T"}}
    RunWorker(runner, state, "new")._spawn("do it", resume=False)
    return seen


@pytest.mark.parametrize("url", ["http://sy.example:8000", "http://sy.example:8000/", "http://sy.example:8000/api/v1"])
def test_a_run_exports_its_telemetry_to_switchyard_with_its_key(tmp_path, monkeypatch, url):
    env = _spawned_env(tmp_path, monkeypatch, url=url, provider_env={})

    assert {name: env[name] for name in env if name.startswith(("OTEL_", "CLAUDE_CODE_ENABLE"))} == {
        "CLAUDE_CODE_ENABLE_TELEMETRY": "1",
        "OTEL_LOGS_EXPORTER": "otlp",
        "OTEL_METRICS_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
        "OTEL_EXPORTER_OTLP_ENDPOINT": RELAY,
        "OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer sy_abc_run7",
    }
    assert env["SWITCHYARD_URL"] == url


def test_the_providers_env_wins(tmp_path, monkeypatch):
    env = _spawned_env(
        tmp_path,
        monkeypatch,
        url="http://sy.example:8000",
        provider_env={"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "CLAUDE_CODE_ENABLE_TELEMETRY": "0"},
    )

    assert env["OTEL_EXPORTER_OTLP_PROTOCOL"] == "http/protobuf"
    assert env["CLAUDE_CODE_ENABLE_TELEMETRY"] == "0"
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == RELAY


def test_a_runs_end_is_reported_only_after_its_exports_reached_the_server(tmp_path):
    calls = []

    class Api:
        def request(self, method, path, **kwargs):
            calls.append(("status", kwargs["json"]["status"]))
            return SimpleNamespace(json=lambda: {})

    class Relay:
        def settle(self, run, *, stop):
            calls.append(("settle", run))
            return True

    runner = SimpleNamespace(
        api=Api(),
        relay=Relay(),
        stop=threading.Event(),
        store=SimpleNamespace(forget=lambda run_id: None, folder=tmp_path),
        console=SimpleNamespace(say=lambda message: None),
        providers={},
    )
    state = RunState(id=7, attempt=1, provider="claude", outcome="cancelled")

    RunWorker(runner, state, "finish")._finish()

    assert calls == [("settle", 7), ("status", "cancelled")]
