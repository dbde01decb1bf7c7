"""What a run (worker.py, workdir.py) uses of the runner that holds it: loop.py's ``Runner``, named by
this Protocol rather than imported, as loop.py imports them."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Protocol

from switchyard_client.api.client import Client
from switchyard_client.runner.config import ProviderConfig, RunnerConfig
from switchyard_client.runner.console import Console
from switchyard_client.runner.otlp_relay import OtlpRelay
from switchyard_client.runner.repos import HostedRepository
from switchyard_client.runner.state import RunState, StateStore
from switchyard_client.runner.watcher import Watcher


class Host(Protocol):
    config: RunnerConfig
    providers: dict[str, ProviderConfig]
    console: Console
    api: Client  # with the runner's key
    root: Path
    jobs: Path  # the job logs
    store: StateStore
    stop: threading.Event
    on_exit: str
    watcher: Watcher
    relay: OtlpRelay  # the agents' telemetry goes through it
    repos: list[HostedRepository]  # the clones this runner holds
    reported_at: float  # when the worktrees were last reported (0: with the next heartbeat)

    def hosted(self, repository: dict[str, Any]) -> HostedRepository | None: ...

    def unregister(self, run_id: int) -> None: ...

    def lease_renew(self, state: RunState, sent_at: float) -> None: ...
