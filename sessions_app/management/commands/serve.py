"""Run the whole app on one machine: web, worker, beat, observer and a runner as supervised children.

This is what `make run` uses for the embedded default. In production each process type
runs on its own (see the Procfile); here one command starts them all, restarts any that
dies, and stops them together on Ctrl-C or SIGTERM. Each child runs in a process group of its
own that the supervisor signals as a whole (a worker and its pool, say), and dies with the
supervisor even when that is killed with SIGKILL; one serve at a time runs over a var/ folder
(sessions_app/supervision.py). With ``--runner-config`` (``make run`` passes the file setup_demo
wrote) it also starts the local runner, `switchyard runner`, which starts the agents of runs.
"""

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.core.management import get_commands
from django.core.management.base import BaseCommand, CommandError

from sessions_app.supervision import ServeAlreadyRunning, ServeLock, die_with_parent

RESTART_DELAY_SECONDS = 2.0
STOP_GRACE_SECONDS = 15.0
# The welcome (URLs, demo key) waits until every child has run this long, so their start-up lines
# come before it and it stays the last thing on screen.
WELCOME_SETTLE_SECONDS = 3.0


@dataclass
class Child:
    name: str
    argv: list[str]
    process: subprocess.Popen | None = None
    restarts: int = 0
    started_at: float = field(default=0.0)

    def start(self) -> None:
        # A session (and so a process group) of its own: Ctrl-C in the terminal reaches only the
        # supervisor, which stops the children in order; signal() reaches the child's own children.
        # Warnings and errors only, unless LOG_LEVEL says otherwise: a person reads this console.
        # Unbuffered, so that piped (`make run | tee`) the lines keep the order they were written in.
        # Celery's warning about running as root (a container, or a developer's root shell) is
        # several lines of noise on a local console that may land below the welcome.
        env = {
            **os.environ,
            "LOG_LEVEL": os.environ.get("LOG_LEVEL", "WARNING"),
            "PYTHONUNBUFFERED": "1",
            "PYTHONWARNINGS": "ignore:You're running the worker with superuser privileges",
        }
        self.process = subprocess.Popen(self.argv, start_new_session=True, preexec_fn=die_with_parent(), env=env)
        self.started_at = time.monotonic()

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def terminate(self) -> None:
        """SIGTERM to the child alone: it stops its own children (a worker its pool) in order."""
        if self.running():
            self.process.terminate()

    def signal(self, sig: int) -> None:
        """``sig`` to the child's whole process group."""
        if self.running():
            os.killpg(self.process.pid, sig)

    def kill_leftovers(self) -> None:
        """Whatever of the child's process group outlived it (a pool process, say)."""
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)


class Command(BaseCommand):
    help = (
        "Serve Switchyard with its background processes: the ASGI web server (uvicorn), a Celery "
        "worker, Celery beat and the file observer, restarting any that exits. Stops all of them "
        "on Ctrl-C, SIGTERM or SIGHUP."
    )

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument(
            "--only",
            action="append",
            choices=["web", "worker", "beat", "observer", "runner"],
            help="Start only these (repeatable). Default: all.",
        )
        parser.add_argument(
            "--welcome-file",
            help="Print this file (then delete it) once the web server answers: `make run` passes the one "
            "setup_demo --welcome-file wrote, so the URLs and the demo key are the last lines of start-up.",
        )
        parser.add_argument(
            "--runner-config",
            help="Also run `switchyard runner --config FILE` (the local runner; `make run` passes the file "
            "setup_demo --runner-config wrote). Skipped when the file or the client's runner is missing.",
        )

    def handle(self, *args, host, port, only, welcome_file, runner_config=None, **options):
        lock = ServeLock(settings.VAR_DIR)
        try:
            lock.acquire(host=host, port=port)
        except ServeAlreadyRunning as exc:
            raise CommandError(str(exc)) from None
        try:
            self._supervise(host, port, only, welcome_file, runner_config)
        finally:
            lock.release()

    def _supervise(
        self, host: str, port: int, only: list[str] | None, welcome_file: str | None, runner_config: str | None
    ) -> None:
        children = [c for c in self._children(host, port, runner_config) if not only or c.name in only]
        stopping = False

        def request_stop(signum, frame):
            nonlocal stopping
            stopping = True

        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, request_stop)

        has_web = any(c.name == "web" for c in children)
        # The runner once the web server answers: started beside it, its first line would be that
        # Switchyard is unreachable.
        later = [c for c in children if c.name == "runner" and has_web]
        for child in children:
            if child not in later:
                child.start()
        self.stdout.write(f"[serve] started {', '.join(c.name for c in children)}; waiting for the web server …")
        welcomed = not has_web

        while not stopping:
            time.sleep(0.5)
            if later and _answers(host, port):
                for child in later:
                    child.start()
                later = []
            if not welcomed and not later and self._settled(children) and _answers(host, port):
                welcomed = True
                self._welcome(host, port, welcome_file)
            for child in children:
                if stopping or child.process is None or child.running():
                    continue
                code = child.process.returncode
                child.restarts += 1
                self.stderr.write(f"[serve] {child.name} exited with {code}; restarting (#{child.restarts})")
                time.sleep(RESTART_DELAY_SECONDS)
                if not stopping:
                    child.start()

        self.stdout.write("[serve] stopping …")
        # The runner first, while the web server still answers: it reports how the runs it stops ended.
        _stop([c for c in children if c.name == "runner"])
        _stop([c for c in children if c.name != "runner"])
        self.stdout.write("[serve] stopped.")

    def _settled(self, children: list[Child]) -> bool:
        now = time.monotonic()
        return all(c.running() and now - c.started_at >= WELCOME_SETTLE_SECONDS for c in children)

    def _welcome(self, host: str, port: int, welcome_file: str | None) -> None:
        """The last lines of start-up, where a person looks: the URLs and (from `make run`) the demo
        key, which setup_demo left in a private file rather than print it above the children's logs."""
        text = ""
        if welcome_file:
            path = Path(welcome_file)
            if path.exists():
                text = path.read_text(encoding="utf-8")
                path.unlink()
        self.stdout.write("[serve] running — Ctrl-C stops everything")
        self.stdout.write(text.rstrip("\n") if text else f"Switchyard is up: http://{host}:{port}/")
        self.stdout.flush()

    def _children(self, host: str, port: int, runner_config: str | None = None) -> list[Child]:
        python = sys.executable
        manage = [python, "manage.py"]
        # Warnings and errors only: a person reads this console. One line per failed request (4xx and
        # 5xx, from django.request), none per successful one; no Celery banner.
        celery = [python, "-m", "celery", "-A", "config.celery_app", "--quiet"]
        children = [
            Child(
                "web",
                [python, "-m", "config.http_server", "--host", host, "--port", str(port), "--no-access-log"]
                + ["--log-level", "warning"],
            ),
            # The prefork pool (one child): only it enforces the tasks' time limits.
            Child("worker", [*celery, "worker", "--concurrency=1", "--loglevel=WARNING"]),
            Child(
                "beat",
                [
                    *celery,
                    "beat",
                    "--loglevel=WARNING",
                    "--scheduler",
                    "django_celery_beat.schedulers:DatabaseScheduler",
                ],
            ),
        ]
        if "observe" in get_commands():
            # -v 0: serve already says what it started; the observer's own start line would land
            # below the welcome when the machine is slow.
            children.append(Child("observer", [*manage, "observe", "-v", "0"]))
        runner = _runner_child(python, runner_config)
        if runner is not None:
            children.append(runner)
        return children


def _stop(children: list[Child]) -> None:
    for child in children:
        child.terminate()
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    for child in children:
        while child.running() and time.monotonic() < deadline:
            time.sleep(0.1)
        if child.running():
            child.signal(signal.SIGKILL)
        child.kill_leftovers()


def _runner_child(python: str, config: str | None) -> Child | None:
    """The local runner, when there is a config for it and the client package has the runner."""
    if not config or not Path(config).is_file() or importlib.util.find_spec("switchyard_client.runner") is None:
        return None
    # --on-exit stop: Ctrl-C stops everything make run started, agents included (their runs end
    # failed) rather than leaving them to be re-adopted by the next make run. A runner that crashes
    # is restarted by serve and re-adopts its agents as usual.
    return Child(
        "runner", [python, "-m", "switchyard_client.cli", "runner", "--config", str(config), "--on-exit", "stop"]
    )


def _answers(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=1).close()
    except OSError:
        return False
    return True
