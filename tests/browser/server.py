"""The app served by a real ASGI server (uvicorn) for browser tests.

It runs in its own process against the test's database, file roots and channel layer (see
tests/worker.py), so what a browser sees went through HTTP, websockets and the real middleware.
Tests that use it need ``transactional_db``: the server only sees committed rows.
"""

import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
from django.test import override_settings

from tests.worker import FILE_ROOTS, ROOT, stop_process, worker_environment


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PortTaken(Exception):
    """The server could not bind its port: something else took it first."""


class ServerProcess:
    def __init__(self, log_path: Path, *, module: str = "config.http_server", env: dict | None = None):
        # The web child `manage.py serve` starts: uvicorn with the HTTP limits, whose stop tells the
        # long polls in flight to answer (a runner's poll no longer holds a test's teardown for the
        # 20 s of stop_process); or "uvicorn" itself (same options).
        self.module = module
        self.env = env  # added to the environment of tests/worker.py (a None value removes the variable)
        self.log_path = log_path
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None
        self.roots: dict[str, Path] = {}  # its file roots, when it has its own (module_server)

    def start(self, timeout: float = 60) -> "ServerProcess":
        # free_port's port is only free when it answers: another process (a runner's telemetry relay
        # in a test beside this one) may bind it before the server does. Then the server starts again
        # on another.
        for _ in range(3):
            try:
                return self._start(timeout)
            except PortTaken:
                self.log.close()
                self.port = free_port()
                self.url = f"http://127.0.0.1:{self.port}"
        raise RuntimeError(f"three ports in a row were taken before the server bound them:\n{self.output()}")

    def _start(self, timeout: float) -> "ServerProcess":
        self.log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                self.module,
                *(["config.asgi:application"] if self.module == "uvicorn" else []),
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
            ],
            cwd=ROOT,
            env={k: v for k, v in worker_environment(self.env).items() if v is not None},
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                if f"address ('127.0.0.1', {self.port}): address already in use" in self.output():
                    raise PortTaken(self.port)
                raise RuntimeError(f"server exited early:\n{self.output()}")
            try:
                if httpx.get(f"{self.url}/accounts/login/", timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"server not answering after {timeout}s:\n{self.output()}")

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")[-5000:]

    def stop(self) -> None:
        stop_process(self.process, getattr(self, "log", None))


def module_server(django_db_blocker, tmp_path_factory, name: str, env: dict | None = None) -> ServerProcess:
    """A started server for a module's tests, with file roots of its own (``.roots``: each of
    FILE_ROOTS and EXPORT_ROOT, its one export root), for a module-scoped fixture that has
    ``django_db_setup``; the caller stops it. ``env`` as ServerProcess takes it."""
    base = tmp_path_factory.mktemp(f"{name}-roots")
    roots = {root: base / root.lower() for root in FILE_ROOTS}
    roots["EXPORT_ROOT"] = base / "exports"
    for path in roots.values():
        path.mkdir()
    served = {root: roots[root] for root in FILE_ROOTS}
    with django_db_blocker.unblock(), override_settings(**served, EXPORT_ROOTS=[roots["EXPORT_ROOT"]]):
        server = ServerProcess(tmp_path_factory.mktemp(name) / "server.log", env=env).start()
    server.roots = roots
    return server
