"""`make run`'s local runner: setup_demo --runner-config makes the runner `local` and a private config
holding a valid key, reused across runs; serve --runner-config starts `switchyard runner` with it."""

import os
import signal
import sqlite3
import subprocess
import sys
from io import StringIO
from pathlib import Path

import httpx
import pytest
from django.core.management import call_command

from board.models import Task
from runners.models import Runner
from sessions_app.keys import api_key_find, api_key_revoke
from sessions_app.management.commands.serve import _runner_child
from switchyard_client.runner.config import load_config
from tests.sessions_app.test_serve_command import _alive, _get, descendants, free_port, stop
from tests.worker import ROOT, wait_for
from tests.workspaces.conftest import git


@pytest.fixture
def setup_demo(file_roots, tmp_path, django_capture_on_commit_callbacks, settings):
    config = tmp_path / "var" / "local-runner.toml"
    # The var/ whose serve lock setup_demo looks at: the test's own, not one a `make run` beside the suite holds.
    settings.VAR_DIR = tmp_path / "var"

    def run(port: str = "9001") -> list[str]:
        out = StringIO()
        # The file is written once the key is committed (on_commit).
        with django_capture_on_commit_callbacks(execute=True):
            call_command("setup_demo", "--port", port, "--runner-config", str(config), stdout=out)
        return out.getvalue().splitlines()

    run.config = config
    return run


def _runner_keys() -> int:
    return Runner.objects.get(name="local").agent.api_keys.count()


@pytest.mark.django_db
def test_setup_demo_makes_the_local_runner_and_a_private_config_with_its_key(setup_demo, tmp_path):
    lines = setup_demo()

    config = setup_demo.config
    assert config.stat().st_mode & 0o777 == 0o600
    parsed = load_config(config, env={})
    assert (parsed.name, parsed.url, parsed.capacity, parsed.labels) == ("local", "http://127.0.0.1:9001", 2, ["local"])
    assert parsed.root == (tmp_path / "var" / "runner").resolve()
    runner = Runner.objects.get(name="local")
    key = api_key_find(key=parsed.key)
    assert key.agent == runner.agent and key.scopes == ["run"]
    assert runner.providers == []  # the runner says which it offers, in its heartbeat
    assert f"Made a key for the local runner 'local'; it is kept in {config}." in lines
    assert parsed.key not in "\n".join(lines)  # never printed


@pytest.mark.django_db
def test_the_key_is_reused_while_valid_and_minted_again_when_lost_or_revoked(setup_demo):
    setup_demo()
    first = setup_demo.config.read_text()

    # again: the same file, no new key
    lines = setup_demo()
    assert setup_demo.config.read_text() == first and _runner_keys() == 1
    assert not any("Made a key" in line for line in lines)

    # another port: the file follows, with the same key
    setup_demo(port="9002")
    moved = load_config(setup_demo.config, env={})
    assert moved.url == "http://127.0.0.1:9002" and moved.key == load_config_text(first).key
    assert _runner_keys() == 1

    # the key revoked (in the admin, say): a new one
    api_key_revoke(api_key=api_key_find(key=moved.key))
    setup_demo(port="9002")
    renewed = load_config(setup_demo.config, env={})
    assert renewed.key != moved.key and api_key_find(key=renewed.key) is not None
    assert _runner_keys() == 2

    # the file lost, or unreadable: a new one, kept private
    setup_demo.config.unlink()
    setup_demo(port="9002")
    assert load_config(setup_demo.config, env={}).key not in (moved.key, renewed.key)
    setup_demo.config.write_text("not [toml")
    setup_demo.config.chmod(0o644)
    setup_demo(port="9002")
    assert load_config(setup_demo.config, env={}).key
    assert setup_demo.config.stat().st_mode & 0o777 == 0o600
    assert _runner_keys() == 4


def load_config_text(text: str):
    import tomllib

    from switchyard_client.runner.config import parse_config

    return parse_config(tomllib.loads(text), env={})


@pytest.mark.django_db
def test_demo_cards_make_a_good_first_run_in_a_demo_repository(setup_demo, tmp_path):
    setup_demo()

    guide = Task.objects.get(title="Write the onboarding guide for new agents")
    assert "press Run on this card" in guide.description
    repository = guide.repository
    assert repository.name == "demo-shop"
    assert Path(repository.path) == (tmp_path / "var" / "demo-repos" / "demo-shop").resolve()
    assert git(repository.path, "log", "--format=%s").strip() == "Demo shop"
    asks = Task.objects.get(title="Add retries to the webhook sender")
    assert "\nask: How many attempts" in asks.description and asks.repository == repository
    assert Task.objects.filter(repository__isnull=True).count() == 2 + 3  # two demo cards, the campaign's


def test_serve_starts_the_runner_only_with_a_config_and_the_client_runner(tmp_path):
    assert _runner_child(sys.executable, None) is None
    assert _runner_child(sys.executable, str(tmp_path / "missing.toml")) is None
    config = tmp_path / "local-runner.toml"
    config.write_text("[runner]\n")
    child = _runner_child(sys.executable, str(config))
    assert child.name == "runner"
    assert child.argv == [sys.executable, "-m", "switchyard_client.cli", "runner", "--config", str(config)] + [
        "--on-exit",
        "stop",
    ]


def test_make_runs_local_runner_comes_up_under_serve_and_stops_with_it(tmp_path):
    # given what `make run` does, in a var/ of the test's own
    var = tmp_path / "var"
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL") and not k.startswith("PYTEST")}
    env.update(DJANGO_SETTINGS_MODULE="config.settings.local", SWITCHYARD_VAR_DIR=str(var), DEBUG="0")
    env.pop("LOG_LEVEL", None)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=180)
    port = free_port()
    config = var / "local-runner.toml"
    setup = subprocess.run(
        [sys.executable, "manage.py", "setup_demo", "--port", str(port), "--runner-config", str(config)],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    demo_key = setup.stdout.splitlines()[-1]  # the demo agent's key (scope orchestrate: may queue runs)
    env["DEMO_AGENT_SPEED"] = "20"  # through serve and the runner to the demo agent
    log_path = tmp_path / "serve.log"
    with open(log_path, "wb") as log:
        serve = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--port", str(port), "--only", "web", "--only", "runner"]
            + ["--runner-config", str(config)],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        family: set[int] = set()
        try:
            assert wait_for(lambda: _get(f"http://127.0.0.1:{port}/healthz"), timeout=90, message="the web child")
            # when it runs, the runner checks in: `local` is online (read from serve's own database)
            wait_for(lambda: _runner_status(var) == "online", timeout=60, message="the local runner online")
            family = descendants(serve.pid)
            runner = [pid for pid in family if "switchyard_client.cli runner" in _cmdline(pid)]
            assert len(runner) == 1

            # and a person presses Run on the demo card meant for a first run (here: the API call behind it)
            api = f"http://127.0.0.1:{port}/api/v1"
            headers = {"Authorization": f"Bearer {demo_key}"}
            task = _task_id(var, "Write the onboarding guide for new agents")
            queued = httpx.post(f"{api}/tasks/{task}/runs/", json={"provider": "demo"}, headers=headers, timeout=10)
            assert queued.status_code == 201, queued.text
            run_url = f"{api}/runs/{queued.json()['id']}/"
            done = wait_for(
                lambda: (r := httpx.get(run_url, headers=headers, timeout=10).json())["status"] in _ENDED and r,
                timeout=90,
                message="the demo run to end",
            )
            assert done["status"] == "succeeded", done
            # it worked in a worktree of the demo repository and committed its notes there
            assert git(done["workdir"], "log", "-1", "--format=%an|%s").strip() == (
                f"Switchyard demo agent|demo: notes for task #{task}: Write the onboarding guide for new agents"
            )
            assert httpx.get(f"{api}/tasks/{task}/", headers=headers, timeout=10).json()["status"] == "review"

            # then SIGTERM to serve stops the runner with the rest
            serve.send_signal(signal.SIGTERM)
            assert serve.wait(timeout=60) == 0
            wait_for(lambda: not any(_alive(pid) for pid in family), timeout=10, message="every child gone")
        finally:
            survivors = {pid: _cmdline(pid) for pid in family if _alive(pid)}
            stop(serve)
            for pid in family:
                if _alive(pid):
                    os.kill(pid, signal.SIGKILL)
    output = log_path.read_text()
    assert "[serve] started web, runner" in output and "[serve] stopped." in output
    # the runner's console: a start line, one line per run, no noise (it starts once the web answers)
    runner_lines = [line for line in output.splitlines() if " runner local: " in line]
    assert "unreachable" not in output, runner_lines
    assert len(runner_lines) <= 5, runner_lines
    assert survivors == {}
    assert "Traceback" not in output


_ENDED = ("succeeded", "failed", "cancelled", "lost")


def _task_id(var: Path, title: str) -> int:
    with sqlite3.connect(var / "switchyard.sqlite3", timeout=5) as db:
        return db.execute("SELECT id FROM board_task WHERE title = ?", (title,)).fetchone()[0]


def _runner_status(var: Path) -> str | None:
    try:
        with sqlite3.connect(var / "switchyard.sqlite3", timeout=5) as db:
            row = db.execute("SELECT status FROM runners_runner WHERE name = 'local'").fetchone()
    except sqlite3.Error:
        return None
    return row[0] if row else None


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""
