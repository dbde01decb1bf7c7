"""`manage.py serve`, the supervisor behind `make run`, started for real on a free port."""

import os
import signal
import socket
import sqlite3
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
    """Running, not only a zombie: an orphan that exited waits for its new parent to reap it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def _described(pids) -> list[str]:
    """Each pid still running with its command line, for a failure that says who outlived serve."""
    found = []
    for pid in sorted(pids):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[:2]
        except FileNotFoundError:
            continue
        found.append(f"{pid} state={state[0]} ppid={state[1]} {argv.strip()}")
    return found


# --- A crash cannot split serve from its children; one serve per var/ ---------------------------


@pytest.fixture(scope="module")
def migrated_env(tmp_path_factory):
    """The embedded default (SQLite, filesystem broker) in a var/ of its own, migrated once."""
    var = tmp_path_factory.mktemp("serve") / "var"
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL") and not k.startswith("PYTEST")}
    env.update(DJANGO_SETTINGS_MODULE="config.settings.local", SWITCHYARD_VAR_DIR=str(var), DEBUG="0")
    env.pop("LOG_LEVEL", None)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=180)
    return env


def start_serve(env, log_path: Path, *args: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    log = open(log_path, "wb")  # noqa: SIM115 - the process holds it; closed with the test's tmp_path
    serve = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port), *args],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    return serve, port


def descendants(pid: int) -> set[int]:
    found, todo = set(), [pid]
    while todo:
        for child in children_of(todo.pop()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def stop(serve: subprocess.Popen) -> None:
    if serve.poll() is None:
        serve.send_signal(signal.SIGTERM)
        try:
            serve.wait(timeout=40)
        except subprocess.TimeoutExpired:
            serve.kill()


def test_kill_9_of_serve_takes_every_child_and_grandchild_with_it(migrated_env, tmp_path):
    # given serve running web, worker (with its pool process), beat and observer
    serve, port = start_serve(migrated_env, tmp_path / "serve.log")
    family: set[int] = set()
    try:
        wait_for(lambda: _get(f"http://127.0.0.1:{port}/healthz"), timeout=90, message="the web child")
        family = wait_for(
            lambda: len(descendants(serve.pid)) >= 5 and descendants(serve.pid), timeout=60, message="all children"
        )

        # when serve is killed with SIGKILL (no handler runs)
        os.kill(serve.pid, signal.SIGKILL)
        serve.wait(timeout=10)

        # then every process it started goes too
        try:
            wait_for(lambda: not any(_alive(pid) for pid in family), timeout=60, interval=0.2, message="the orphans")
        except AssertionError:
            pytest.fail(f"still running 60 s after serve died: {_described(p for p in family if _alive(p))}")
    finally:
        for pid in family:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_second_serve_over_the_same_var_refuses_and_names_the_first(migrated_env, tmp_path):
    # given a serve running (the web child alone is enough)
    first, port = start_serve(migrated_env, tmp_path / "first.log", "--only", "web")
    try:
        wait_for(lambda: _get(f"http://127.0.0.1:{port}/healthz"), timeout=90, message="the first serve")
        first_children = descendants(first.pid)

        # when a second one starts over the same var/
        second = subprocess.run(
            [sys.executable, "manage.py", "serve", "--port", str(free_port()), "--only", "web"],
            cwd=ROOT,
            env=migrated_env,
            capture_output=True,
            text=True,
            timeout=60,
        )

        # then it refuses, naming the running one, and started nothing
        assert second.returncode == 1
        assert (
            f"another `manage.py serve` is already running over {migrated_env['SWITCHYARD_VAR_DIR']} "
            f"(pid {first.pid}, web on http://127.0.0.1:{port}/)"
        ) in second.stderr
        assert "[serve] started" not in second.stdout
        # and the first one is untouched
        assert first.poll() is None
        assert descendants(first.pid) == first_children
        assert _get(f"http://127.0.0.1:{port}/healthz").status_code == 200
    finally:
        stop(first)

    # once the first has stopped, a serve over that var/ starts again
    again, again_port = start_serve(migrated_env, tmp_path / "again.log", "--only", "web")
    try:
        wait_for(lambda: _get(f"http://127.0.0.1:{again_port}/healthz"), timeout=90, message="the next serve")
    finally:
        stop(again)


def test_start_up_ends_with_the_urls_and_the_demo_key(migrated_env, tmp_path):
    # given what `make run` does: setup_demo leaves the welcome in a private file for serve
    welcome = tmp_path / "welcome"
    port = free_port()
    subprocess.run(
        [sys.executable, "manage.py", "setup_demo", "--port", str(port), "--welcome-file", str(welcome)],
        cwd=ROOT,
        env=migrated_env,
        check=True,
        capture_output=True,
        timeout=120,
    )
    assert welcome.stat().st_mode & 0o777 == 0o600
    welcome_text = welcome.read_text()
    key = welcome_text.splitlines()[-1]

    # when serve starts everything, and a person then makes a refused and a missing request
    log_path = tmp_path / "serve.log"
    with open(log_path, "wb") as log:
        serve = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--port", str(port), "--welcome-file", str(welcome)],
            cwd=ROOT,
            env=migrated_env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_for(lambda: key in log_path.read_text(), timeout=120, message="the welcome")
            refused = httpx.get(f"http://127.0.0.1:{port}/api/v1/agents/me/", timeout=10)
            missing = httpx.get(f"http://127.0.0.1:{port}/nowhere", timeout=10)
            wait_for(lambda: "Not Found: /nowhere" in log_path.read_text(), message="the 404 line")
        finally:
            stop(serve)
    assert (refused.status_code, missing.status_code) == (401, 404)

    # then start-up ends with the URLs and the key, and the private file is gone
    output = log_path.read_text()
    block = "[serve] running — Ctrl-C stops everything\n" + welcome_text
    assert block in output
    assert not welcome.exists()
    # and after it came only one line per request (no traceback) until serve was stopped
    after = output.split(block, 1)[1].split("[serve] stopping", 1)[0]
    assert [line.split(" ", 2)[-1] for line in after.splitlines()] == [
        "WARNING django.request Unauthorized: /api/v1/agents/me/",
        "WARNING django.request Not Found: /nowhere",
    ]
    assert "Traceback" not in output
    assert "celery@" not in output  # the worker's banner


def _demo_key_count(env) -> int:
    with sqlite3.connect(Path(env["SWITCHYARD_VAR_DIR"]) / "switchyard.sqlite3") as db:
        return db.execute("SELECT COUNT(*) FROM sessions_app_agentapikey").fetchone()[0]


def _setup_demo(env, port: int, welcome: Path, runner_config: Path) -> subprocess.CompletedProcess:
    """What `make run` runs before serve."""
    argv = ["--port", str(port), "--welcome-file", str(welcome), "--runner-config", str(runner_config)]
    return subprocess.run(
        [sys.executable, "manage.py", "setup_demo", *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_second_make_run_refuses_before_it_rewrites_the_first_ones_files(migrated_env, tmp_path):
    # given a first `make run`: setup_demo wrote the local runner's config and the welcome, serve runs
    runner_config, welcome = tmp_path / "local-runner.toml", tmp_path / "welcome"
    port = free_port()
    assert _setup_demo(migrated_env, port, welcome, runner_config).returncode == 0
    first = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port), "--only", "web", "--welcome-file", str(welcome)],
        cwd=ROOT,
        env=migrated_env,
        stdout=open(tmp_path / "first.log", "wb"),  # noqa: SIM115 - the process holds it
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for(lambda: not welcome.exists(), timeout=90, message="the first serve to print its welcome")
        config_before, keys_before = runner_config.read_bytes(), _demo_key_count(migrated_env)

        # when a second one prepares on another port over the same var/
        second = _setup_demo(migrated_env, free_port(), welcome, runner_config)

        # then it refuses, naming the running one, and wrote nothing: the runner's URL and key, no
        # welcome (with a new demo key), no key in the database
        assert second.returncode == 1, second.stdout + second.stderr
        assert (
            f"another `manage.py serve` is already running over {migrated_env['SWITCHYARD_VAR_DIR']} "
            f"(pid {first.pid}, web on http://127.0.0.1:{port}/)"
        ) in second.stderr
        assert runner_config.read_bytes() == config_before
        assert f"http://127.0.0.1:{port}" in config_before.decode()
        assert not welcome.exists()
        assert _demo_key_count(migrated_env) == keys_before
        assert first.poll() is None
    finally:
        stop(first)

    # and once the first has stopped, preparing a serve over that var/ works again
    assert _setup_demo(migrated_env, free_port(), welcome, runner_config).returncode == 0
