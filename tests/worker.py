"""A real Celery worker process for integration tests.

It runs against the same test database as the test (its DATABASE_URL is built from the
live connection settings), the same broker, and the same file roots, so a test can queue
a task, wait for its effect, kill the worker with SIGKILL mid-task and start another.
Tests that use it need ``transactional_db``: the worker only sees committed rows.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parents[1]
FILE_ROOTS = (
    "WORKSPACE_ROOT",
    "SAVED_REPORTS_ROOT",
    "STATE_DIR",
    "LOGS_ROOT",
    "REPORTS_DIR",
    "TASK_DEFS_DIR",
    "ARCHIVE_ROOT",
)


def database_url() -> str:
    config = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{config['NAME']}"
    user = quote(config.get("USER") or "postgres")
    password = f":{quote(config['PASSWORD'])}" if config.get("PASSWORD") else ""
    host = config.get("HOST") or "127.0.0.1"
    port = config.get("PORT") or 5432
    return f"postgres://{user}{password}@{host}:{port}/{config['NAME']}"


def worker_environment(extra: dict | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env["DJANGO_SETTINGS_MODULE"] = "config.settings.test"
    env["DATABASE_URL"] = database_url()
    for name in FILE_ROOTS:
        env[name] = str(getattr(settings, name))
    env["EXPORT_ROOTS"] = os.pathsep.join(str(p) for p in settings.EXPORT_ROOTS)
    env.update(extra or {})
    return env


class WorkerProcess:
    def __init__(self, log_path: Path, extra_env: dict | None = None):
        self.log_path = log_path
        self.extra_env = extra_env
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 60) -> "WorkerProcess":
        self.log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        start_offset = self.log_path.stat().st_size
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "config.celery_app",
                "worker",
                "--pool=solo",
                "--concurrency=1",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "--loglevel=INFO",
                "-n",
                f"test{os.getpid()}@%h",
            ],
            cwd=ROOT,
            # Celery runs Django's system checks at each worker start, importing every view for the URL
            # checks: 0.45 s of CPU, and the suite starts dozens of workers. `manage.py serve` (its own
            # worker included) and `check --deploy` run them in their tests.
            env=worker_environment({"CELERY_SKIP_CHECKS": "1", **(self.extra_env or {})}),
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"celery worker exited early:\n{self.output()}")
            with open(self.log_path, "rb") as log:
                log.seek(start_offset)
                if b" ready." in log.read():
                    return self
            time.sleep(0.1)
        raise RuntimeError(f"celery worker not ready after {timeout}s:\n{self.output()}")

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")[-5000:]

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)
            self.process.wait(timeout=30)

    def stop(self) -> None:
        stop_process(self.process, getattr(self, "log", None))


def stop_process(process: subprocess.Popen | None, log=None) -> None:
    """SIGTERM, then SIGKILL after 20 s; close its log file."""
    if process is not None and process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if log is not None:
        log.close()


# How long an in-process websocket test waits to connect or for a message: channels' default is 1 s, which a
# connect ran past with both suites side by side on a slow hour.
WS_TIMEOUT = 10


def wait_for(predicate, *, timeout: float = 30, interval: float = 0.05, message: str = "condition"):
    """Poll until ``predicate()`` is truthy; returns its value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {message}")
