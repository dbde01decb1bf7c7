"""The telemetry relay's keeper: the relay's listener (otlp_listen.py) in a small process of its own,
which outlives a killed runner.

An agent sends its last export as it exits (Claude Code gives it 2 s at most). With the listener inside
the runner, an agent that ended while its runner was down (killed, not started again yet) had that
export refused, as nothing listened on the relay's port, and its usage was lost. So the runner starts
this process (a session of its own: a kill of the runner or of its group does not reach it) on the
relay's port; it writes each export to the spool before it answers, as the listener always did, and
the runner's forwarder (otlp_forward.py) sends the spool on. A runner started again with the same root
finds it alive (``<root>/otlp-relay.pid``) and keeps it, so the agents it re-adopts export to the same
place throughout.

It ends on its own once, at two checks a second apart, neither a runner of the root
(``<root>/runner.pid``) nor an agent of its runs (``<root>/runs/*.json``) is alive: nobody is left to
export to it. Standard library and the spool only: about 22 MB of RSS, 12 MB of it its own.

``python -m switchyard_client.runner.otlp_keeper ROOT``
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from switchyard_client.runner.otlp_listen import bind, saved_port
from switchyard_client.runner.otlp_spool import OtlpSpool
from switchyard_client.runner.state import pid_start_time, same_process

PID_FILE = "otlp-relay.pid"  # "<pid> <start> <port>" of the live keeper
RUNNER_PID_FILE = "runner.pid"  # "<pid> <start>" of the runner that uses the root now
PORT_FILE = "otlp-relay.port"
CHECK_EVERY = 1.0  # seconds between two looks for a live runner or agent
START_TIMEOUT = 15.0


class Keeper:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.spool = OtlpSpool(self.root / "otlp-spool")  # half-written files of a dead keeper go
        self.keys: dict[str, int] = {}

    def run_for_key(self, key: str) -> int | None:
        """The run whose key this is, from the runs' state files (re-read for a key not known yet)."""
        if key and key not in self.keys:
            self.keys = {state["agent_key"]: state["id"] for state in self._states() if state.get("agent_key")}
        return self.keys.get(key)

    def anyone_alive(self) -> bool:
        if _alive(_read_ints(self.root / RUNNER_PID_FILE)):
            return True
        return any(same_process(state.get("pid"), state.get("pid_start")) for state in self._states())

    def _states(self) -> list[dict]:
        states = []
        for path in (self.root / "runs").glob("*.json"):
            with contextlib.suppress(OSError, ValueError):
                state = json.loads(path.read_text())
                if isinstance(state, dict) and isinstance(state.get("id"), int):
                    states.append(state)
        return states


def main(argv: list[str] | None = None) -> int:
    root = Path((argv if argv is not None else sys.argv[1:])[0])
    keeper = Keeper(root)
    server = bind(saved_port(root / PORT_FILE))
    server.relay = keeper
    port = server.server_address[1]
    _write(root / PORT_FILE, f"{port}\n")
    _write(root / PID_FILE, f"{os.getpid()} {pid_start_time(os.getpid())} {port}\n")
    threading.Thread(target=server.serve_forever, args=(0.5,), name="otlp-keeper", daemon=True).start()
    me = f"{os.getpid()} {pid_start_time(os.getpid())} {port}\n"
    quiet = 0
    while quiet < 2:
        time.sleep(CHECK_EVERY)
        keeper.spool.refresh()  # what the forwarder sent on no longer counts toward the spool's cap
        quiet = 0 if keeper.anyone_alive() else quiet + 1
        if quiet == 2 and _read_ints(root / PID_FILE)[:1] == [os.getpid()]:
            with contextlib.suppress(OSError):
                (root / PID_FILE).unlink()  # first: a runner starting from now on starts a new keeper
            if keeper.anyone_alive():  # one started meanwhile, and may have found this keeper: stay
                _write(root / PID_FILE, me)
                quiet = 0
    server.shutdown()
    server.server_close()
    return 0


def runner_pid_write(root: Path) -> None:
    """This process is the root's runner now: its keeper stays while it lives."""
    _write(Path(root) / RUNNER_PID_FILE, f"{os.getpid()} {pid_start_time(os.getpid())}\n")


def keeper_ensure(root: Path) -> int:
    """The port of the root's live keeper; one is started when there is none."""
    root = Path(root)
    found = keeper_running(root)
    if found is not None:
        return found[1]
    child = subprocess.Popen(
        [sys.executable, "-m", "switchyard_client.runner.otlp_keeper", str(root)],
        cwd="/",
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
        env={k: v for k, v in os.environ.items() if k not in ("SWITCHYARD_RUNNER_KEY", "SWITCHYARD_KEY")},
    )
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        found = keeper_running(root)
        if found is not None and found[0] == child.pid:
            return found[1]
        if child.poll() is not None:
            raise RuntimeError(f"the telemetry relay's keeper ended at once (exit code {child.returncode})")
        time.sleep(0.02)
    raise RuntimeError(f"the telemetry relay's keeper did not start within {START_TIMEOUT:.0f} s")


def keeper_running(root: Path) -> tuple[int, int] | None:
    """(pid, port) of the root's keeper if it is alive."""
    found = _read_ints(Path(root) / PID_FILE)
    if len(found) == 3 and _alive(found[:2]):
        return found[0], found[2]
    return None


def _alive(pid_and_start: list[int]) -> bool:
    return len(pid_and_start) >= 2 and same_process(pid_and_start[0], pid_and_start[1])


def _read_ints(path: Path) -> list[int]:
    with contextlib.suppress(OSError, ValueError):
        return [int(part) for part in path.read_text().split()]
    return []


def _write(path: Path, text: str) -> None:
    """Atomically (temp file, rename): a reader never sees half a line."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main())
