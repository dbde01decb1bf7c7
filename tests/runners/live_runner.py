"""Real `switchyard runner` processes for the end-to-end tests: a config file written from Python
values, the process started with an environment of the test's choosing (PATH with a CLI or a fake
under the real binary's name), and a way to wait on what the server records.

Each runner has a root of its own (its state files and job logs), so two of them stand in for two
machines.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

from django.test import override_settings

from runners.models import Run
from runners.services import runner_key_create
from switchyard_client.runner.process import fenced_kill
from switchyard_client.runner.state import same_process
from tests.browser.server import ServerProcess
from tests.worker import FILE_ROOTS

GIT_ENV = {
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "Runner test",
    "GIT_AUTHOR_EMAIL": "runner@example.com",
    "GIT_COMMITTER_NAME": "Runner test",
    "GIT_COMMITTER_EMAIL": "runner@example.com",
}


def git(folder: Path, *args: str) -> str:
    """``git`` in ``folder`` with the tests' identity and no user or system config; its stdout."""
    env = {**os.environ, **GIT_ENV}
    return subprocess.run(["git", *args], cwd=folder, env=env, check=True, capture_output=True, text=True).stdout


def toml_value(value: Any) -> str:
    """TOML for a string, number, bool, list or (inline) table: enough for a runner's config."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string is JSON's string syntax
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML for {value!r}")


def write_config(
    path: Path,
    *,
    runner: dict[str, Any],
    providers: dict[str, dict[str, Any]],
    repositories: dict[str, dict[str, Any]] | None = None,
) -> Path:
    lines = ["[runner]", *(f"{k} = {toml_value(v)}" for k, v in runner.items())]
    for name, table in providers.items():
        lines += ["", f"[providers.{name}]", *(f"{k} = {toml_value(v)}" for k, v in table.items())]
    for name, table in (repositories or {}).items():
        lines += ["", f"[repositories.{name}]", *(f"{k} = {toml_value(v)}" for k, v in table.items())]
    path.write_text("\n".join(lines) + "\n")
    return path


class RunnerProc:
    """`python -m switchyard_client.cli runner --config ...`, its output in a file."""

    def __init__(self, config: Path, log: Path, *, env: dict[str, str] | None = None, on_exit: str = "leave"):
        self.config, self.log_path, self.extra_env, self.on_exit = config, log, env or {}, on_exit
        self.process: subprocess.Popen | None = None
        self.log = None

    def start(self) -> RunnerProc:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "SWITCHYARD_"))}
        env.update(self.extra_env)
        self.log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()/kill9()
        argv = [sys.executable, "-m", "switchyard_client.cli", "runner", "--config", str(self.config)]
        self.process = subprocess.Popen(
            [*argv, "--on-exit", self.on_exit], stdout=self.log, stderr=subprocess.STDOUT, env=env
        )
        return self

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill9(self) -> None:
        self.process.kill()
        self.process.wait(10)
        self.log.close()

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        if self.log is not None and not self.log.closed:
            self.log.close()


class Machine:
    """One runner's identity (key), root, config and processes: a machine of its own."""

    def __init__(self, base: Path, url: str, name: str, *, labels=(), capacity: int = 2, providers=None, env=None):
        _, issued, _ = runner_key_create(name=name, labels=list(labels), capacity=capacity)
        self.name, self.key, self.url = name, issued.key, url
        self.root = base / name / "root"
        self.root.mkdir(parents=True)
        self.env = dict(env or {})
        self.config = base / name / "switchyard-runner.toml"
        self.runner_table = {
            "url": url,
            "key": self.key,
            "name": name,
            "labels": list(labels),
            "capacity": capacity,
            "root": str(self.root),
            "grace_seconds": 3,
        }
        self.providers = dict(providers or {})
        self.repositories: dict[str, dict[str, Any]] = {}  # [repositories.<name>]: clones on this machine
        self.write()
        self.processes: list[RunnerProc] = []

    def write(self) -> None:
        write_config(self.config, runner=self.runner_table, providers=self.providers, repositories=self.repositories)

    def start(self) -> RunnerProc:
        log = self.config.parent / f"runner-{len(self.processes)}.log"
        proc = RunnerProc(self.config, log, env=self.env).start()
        self.processes.append(proc)
        return proc

    def output(self) -> str:
        return "\n".join(f"--- {p.log_path.name}\n{p.output()}" for p in self.processes)

    def state(self, run: Run) -> dict:
        path = self.root / "runs" / f"{run.pk}.json"
        with contextlib.suppress(OSError, ValueError):
            return json.loads(path.read_text())
        return {}

    def cleanup(self) -> None:
        for proc in self.processes:
            proc.stop()
        # Agents a killed runner left behind, and their watchdogs: stop their process groups.
        for path in (self.root / "runs").glob("*.json"):
            with contextlib.suppress(OSError, ValueError):
                state = json.loads(path.read_text())
                for pid in (state.get("pid"), state.get("watchdog_pid")):
                    if pid:
                        with contextlib.suppress(ProcessLookupError, PermissionError):
                            os.killpg(pid, signal.SIGKILL)
                fenced_kill(state.get("fence") or "")  # what left the agent's group
        # The telemetry relay's keeper, which outlives its runner (it would end on its own soon).
        with contextlib.suppress(OSError, ValueError, ProcessLookupError, PermissionError):
            pid, start, _ = (int(n) for n in (self.root / "otlp-relay.pid").read_text().split())
            if same_process(pid, start):
                os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def short_lease_server(
    *, django_db_blocker, server_roots, tmp_path_factory, lease_seconds: int
) -> Iterator[ServerProcess]:
    """The app with a short lease and heartbeats every second, so a runner that dies loses its runs
    within seconds: for a module-scoped fixture (its file roots from tests/client/live.py)."""
    short = {"RUNNER_LEASE_SECONDS": str(lease_seconds), "RUNNER_HEARTBEAT_SECONDS": "1"}
    settings = {name: server_roots[name] for name in FILE_ROOTS}
    with (
        mock.patch.dict(os.environ, short),
        django_db_blocker.unblock(),
        override_settings(**settings, EXPORT_ROOTS=[server_roots["EXPORT_ROOT"]]),
    ):
        server = ServerProcess(tmp_path_factory.mktemp("server-log") / "server.log").start()
    try:
        yield server
    finally:
        server.stop()


def wait_for(check, *, timeout: float = 30, what: str = "condition", machines=(), interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(interval)
    detail = "".join(f"\nrunner {m.name} output:\n{m.output()[-6000:]}" for m in machines)
    raise AssertionError(f"timed out waiting for {what}{detail}")


def run_in(run: Run, *statuses: str) -> Run | None:
    run.refresh_from_db()
    return run if run.status in statuses else None
