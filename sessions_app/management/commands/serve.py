"""Run the whole app on one machine: web, worker, beat and observer as supervised children.

This is what `make run` uses for the embedded default. In production each process type
runs on its own (see the Procfile); here one command starts them all, restarts any that
dies, and stops them together on Ctrl-C or SIGTERM.
"""

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

from django.core.management import get_commands
from django.core.management.base import BaseCommand

RESTART_DELAY_SECONDS = 2.0
STOP_GRACE_SECONDS = 15.0


@dataclass
class Child:
    name: str
    argv: list[str]
    process: subprocess.Popen | None = None
    restarts: int = 0
    started_at: float = field(default=0.0)

    def start(self) -> None:
        self.process = subprocess.Popen(self.argv, start_new_session=True)
        self.started_at = time.monotonic()

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal(self, sig: int) -> None:
        if self.running():
            os.killpg(self.process.pid, sig)


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
            choices=["web", "worker", "beat", "observer"],
            help="Start only these (repeatable). Default: all.",
        )

    def handle(self, *args, host, port, only, **options):
        # The worker uses the prefork pool (one child): only it enforces the tasks' time limits.
        children = [c for c in self._children(host, port) if not only or c.name in only]
        stopping = False

        def request_stop(signum, frame):
            nonlocal stopping
            stopping = True

        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, request_stop)

        for child in children:
            self.stdout.write(f"[serve] starting {child.name}: {' '.join(child.argv[1:4])} …")
            child.start()
        self.stdout.write(f"[serve] web on http://{host}:{port}/ — Ctrl-C stops everything")

        while not stopping:
            time.sleep(0.5)
            for child in children:
                if stopping or child.running():
                    continue
                code = child.process.returncode
                child.restarts += 1
                self.stderr.write(f"[serve] {child.name} exited with {code}; restarting (#{child.restarts})")
                time.sleep(RESTART_DELAY_SECONDS)
                if not stopping:
                    child.start()

        self.stdout.write("[serve] stopping …")
        for child in children:
            child.signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        for child in children:
            while child.running() and time.monotonic() < deadline:
                time.sleep(0.1)
            if child.running():
                child.signal(signal.SIGKILL)
        self.stdout.write("[serve] stopped.")

    def _children(self, host: str, port: int) -> list[Child]:
        python = sys.executable
        manage = [python, "manage.py"]
        # The worker uses the prefork pool (one child): only it enforces the tasks' time limits.
        children = [
            Child("web", [python, "-m", "uvicorn", "config.asgi:application", "--host", host, "--port", str(port)]),
            Child(
                "worker",
                [python, "-m", "celery", "-A", "config.celery_app", "worker", "--concurrency=1", "--loglevel=INFO"],
            ),
            Child(
                "beat",
                [
                    python,
                    "-m",
                    "celery",
                    "-A",
                    "config.celery_app",
                    "beat",
                    "--loglevel=INFO",
                    "--scheduler",
                    "django_celery_beat.schedulers:DatabaseScheduler",
                ],
            ),
        ]
        if "observe" in get_commands():
            children.append(Child("observer", [*manage, "observe"]))
        return children
