"""The runner's telemetry relay: the OTLP/HTTP endpoint its agents export to, on 127.0.0.1.

An agent's exporter (Claude Code's last export, sent as it exits) must not depend on the server
answering: a server that is restarting, or slow under load, lost those exports for good. So each
agent exports here (agent_env.py points OTEL_EXPORTER_OTLP_ENDPOINT at ``endpoint``); the listener
(otlp_listen.py) takes ``POST /v1/logs``, ``/v1/metrics`` and ``/v1/traces`` (protobuf or JSON,
gzipped or not, with the agent's Authorization header), writes the export to the spool and fsyncs it
(otlp_spool.py), and only then answers 200 with an empty export response. The forwarder
(otlp_forward.py) sends it on. The port is kept in ``<root>/otlp-relay.port`` and taken again by a
runner restarted with the same root, so the agents it re-adopts keep reaching it.

A runner runs the listener in its keeper (``keeper=True``, otlp_keeper.py): a small process of its
own that outlives a killed runner, so an agent that ends while its runner is down still has its last
export taken. Without a keeper (the relay's own tests), the listener is a thread of this process:
``http.server`` (a thread per open connection), no web framework for three POST routes.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from switchyard_client.api.client import Client
from switchyard_client.runner.otlp_forward import Forwarder
from switchyard_client.runner.otlp_keeper import keeper_ensure, runner_pid_write
from switchyard_client.runner.otlp_listen import Server, bind, saved_port
from switchyard_client.runner.otlp_spool import OtlpSpool
from switchyard_client.runner.state import pid_start_time

SETTLE_ON_STOP = 5.0  # a stopping runner waits this long for a run's last exports


class OtlpRelay:
    def __init__(
        self,
        root: Path,
        *,
        api: Client,
        key_for_run: Callable[[int], str | None],
        run_for_key: Callable[[str], int | None],
        say: Callable[[str], None],
        keeper: bool = False,
    ):
        self.root = Path(root)
        self.run_for_key = run_for_key
        self.keeper = keeper
        # A live keeper may be writing: its half-written files are its own to clean up.
        self.spool = OtlpSpool(self.root / "otlp-spool", clean=not keeper)
        self.stop_event = threading.Event()
        self.forwarder = Forwarder(self.spool, api=api, key_for_run=key_for_run, say=say, stop=self.stop_event)
        self.server: Server | None = None
        self.port: int | None = None

    @property
    def port_file(self) -> Path:
        return self.root / "otlp-relay.port"

    @property
    def endpoint(self) -> str:
        """What agents get as OTEL_EXPORTER_OTLP_ENDPOINT (the exporter adds /v1/<signal>)."""
        if self.port is None:
            raise RuntimeError("the telemetry relay is not started")
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        if self.keeper and pid_start_time(os.getpid()) is None:
            self.keeper = False  # no /proc: a keeper could not tell a live runner or agent, so none
        if self.keeper:
            runner_pid_write(self.root)  # the keeper stays while this process (or an agent) lives
            self.port = keeper_ensure(self.root)
        else:
            self.server = bind(saved_port(self.port_file))
            self.server.relay = self
            self.port = self.server.server_address[1]
            self.port_file.write_text(f"{self.port}\n")
            threading.Thread(target=self.server.serve_forever, args=(0.5,), name="otlp-relay", daemon=True).start()
        self.forwarder.start()

    def ensure(self) -> None:
        """A keeper that ended (killed; or it saw no runner in the moment this one started) is started
        again, on the same port."""
        if self.keeper:
            self.port = keeper_ensure(self.root)

    def stop(self) -> None:
        """The forwarder stops; a keeper stays while agents live, and ends on its own after them."""
        self.stop_event.set()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def settle(self, run: int, *, stop: threading.Event) -> bool:
        """Wait until every export of ``run`` is with the server (its end revokes the key they carry);
        once ``stop`` is set, SETTLE_ON_STOP seconds more at most. True if none is left."""
        deadline = None
        while True:
            self.spool.refresh()  # what the keeper wrote
            if self.spool.wait_run_empty(run, 0.5):
                return True
            if stop.is_set():
                deadline = deadline or time.monotonic() + SETTLE_ON_STOP
                if time.monotonic() >= deadline:
                    return False
