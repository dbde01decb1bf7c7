"""`manage.py serve`, the supervisor behind `make run`, started for real on a free port."""

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.worker import wait_for

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.worker


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def children_of(pid: int) -> list[int]:
    result = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True)
    return [int(line) for line in result.stdout.split()]


@pytest.fixture
def embedded_env(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL") and not k.startswith("PYTEST")}
    env.update(DJANGO_SETTINGS_MODULE="config.settings.local", SWITCHYARD_VAR_DIR=str(tmp_path / "var"), DEBUG="0")
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=120)
    return env


def test_serve_starts_everything_restarts_a_dead_child_and_stops_cleanly(embedded_env, tmp_path):
    port = free_port()
    log = open(tmp_path / "serve.log", "wb")  # noqa: SIM115 - closed below
    serve = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port), "--only", "web", "--only", "worker"],
        cwd=ROOT,
        env=embedded_env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        health = wait_for(
            lambda: _get(f"http://127.0.0.1:{port}/healthz"), timeout=60, message="the web child to answer"
        )
        assert health.status_code == 200
        kids = wait_for(lambda: len(children_of(serve.pid)) == 2 and children_of(serve.pid), message="two children")

        os.kill(kids[1], signal.SIGKILL)
        wait_for(lambda: "restarting" in (tmp_path / "serve.log").read_text(), message="a restart")
        wait_for(lambda: len(children_of(serve.pid)) == 2, message="the child to come back")

        serve.send_signal(signal.SIGTERM)
        assert serve.wait(timeout=40) == 0
        assert all(not _alive(pid) for pid in kids[:1] + children_of(serve.pid))
    finally:
        if serve.poll() is None:
            serve.kill()
        log.close()
    assert "[serve] stopped." in (tmp_path / "serve.log").read_text()


def _get(url: str):
    try:
        return httpx.get(url, timeout=2)
    except httpx.HTTPError:
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
