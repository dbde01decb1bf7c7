"""A heartbeat kept going from a background thread while a long-lived process works.

Switchyard counts every request of an agent as a heartbeat, so a process that talks to it often
needs nothing more. A process that may sit quiet for minutes while its agent works (the MCP server
between tool calls, a long upload or download) keeps one of these running: without it the reaper
would take the agent's tasks and worktrees back after HEARTBEAT_TTL_SECONDS (300 s by default).
"""

from __future__ import annotations

import os
import sys
import threading

from switchyard_client.api.client import Client
from switchyard_client.api.errors import SwitchyardError

# Well inside the server's 300 s default, so one or two lost beats cost nothing.
DEFAULT_INTERVAL_SECONDS = 60.0


def interval_from_env() -> float:
    """SWITCHYARD_HEARTBEAT_SECONDS, else 60; at least 1."""
    raw = os.environ.get("SWITCHYARD_HEARTBEAT_SECONDS", "")
    try:
        return max(1.0, float(raw)) if raw else DEFAULT_INTERVAL_SECONDS
    except ValueError:
        return DEFAULT_INTERVAL_SECONDS


class Keepalive:
    """``with Keepalive(client):`` sends ``agent_heartbeat`` every ``interval`` seconds until the block ends.

    A failed beat is reported on stderr (never stdout: the MCP server speaks its protocol there)
    and the next one is tried on time; it never stops the work.
    """

    def __init__(self, client: Client, interval: float | None = None):
        self.client = client
        self.interval = interval if interval is not None else interval_from_env()
        self.beats = 0
        self.last_error: SwitchyardError | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Keepalive:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="switchyard-heartbeat", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Keepalive:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def beat(self) -> None:
        try:
            self.client.agent_heartbeat()
        except SwitchyardError as exc:
            self.last_error = exc
            print(f"switchyard: heartbeat failed: {exc}", file=sys.stderr)
        else:
            self.beats += 1
            self.last_error = None

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.beat()
