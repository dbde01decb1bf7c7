"""What a runner remembers about each run it holds: ``<root>/runs/<run id>.json``, written atomically
(temp file, fsync, rename), so a runner killed at any instant restarts with a whole file — the last
one or the one before — and re-adopts its agents (same pid *and* same start time, so a recycled
pid is never mistaken for the agent)."""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any


@dataclass
class RunState:
    id: int
    attempt: int
    provider: str
    assignment: dict[str, Any] = field(default_factory=dict)  # as /runners/me/next/ handed it out
    session: str = ""
    agent_key: str = ""
    pid: int | None = None
    pid_start: int | None = None  # /proc/<pid>/stat field 22, clock ticks after boot
    watchdog_pid: int | None = None  # the agent's watchdog (watchdog.py), which outlives the runner
    watchdog_start: int | None = None
    sandboxed: bool = False  # its agent was started in a sandbox (sandbox.py)
    fence: str = ""  # SWITCHYARD_FENCE of this attempt's processes (a random mark, new for each spawn)
    workdir: str = ""
    base: str = ""  # the commit the worktree started from, for the summary's diff
    worktree_id: int | None = None
    log_path: str = ""  # absolute
    exit_path: str = ""  # where the wrapper writes the agent's exit code
    shipped: int = 0  # bytes of the log the server has
    parsed: int = 0  # bytes of the log turned into stream events
    parsed_lines: int = 0  # lines before ``parsed``: the events' client ids count them
    started_at: float | None = None  # time.time() of the spawn, for the timeout
    phase: str = "assigned"  # assigned, starting, running, finishing
    outcome: str = ""  # once known: succeeded, failed, cancelled (reported in phase finishing)
    exit_code: int | None = None
    error: str = ""
    # What the agent's own output last said went wrong this attempt (logship.agent_error_in).
    agent_error: str = ""
    agent_ran: bool = False  # an agent was started for this run once: a restart resumes it
    agent_session: str = ""  # the provider's own session id (launch.py): what a restart or a later run resumes
    deferred: dict[str, str] = field(default_factory=dict)  # the tool call its agent deferred (deferral.py)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunState:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


class StateStore:
    def __init__(self, root: Path):
        self.folder = Path(root) / "runs"
        self.folder.mkdir(parents=True, exist_ok=True)

    def path(self, run_id: int) -> Path:
        return self.folder / f"{int(run_id)}.json"

    def save(self, state: RunState) -> None:
        target = self.path(state.id)
        tmp = target.with_suffix(f".json.{os.getpid()}.tmp")
        # 0600: the file holds the run's agent key (valid until the run ends).
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with open(fd, "w", encoding="utf-8") as fh:
            json.dump(asdict(state), fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)

    def load_all(self) -> list[RunState]:
        states = []
        for path in sorted(self.folder.glob("*.json")):
            try:
                states.append(RunState.from_dict(json.loads(path.read_text(encoding="utf-8"))))
            except (OSError, ValueError, TypeError):
                continue  # not ours or unreadable: the server's heartbeat still says what we hold
        return states

    def forget(self, run_id: int) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path(run_id).unlink()


def pid_start_time(pid: int) -> int | None:
    """Field 22 of /proc/<pid>/stat (start time in clock ticks since boot); None if there is no such
    process or it is a zombie (exited, waiting to be reaped: not alive for our purposes)."""
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as fh:
            raw = fh.read().decode("ascii", "replace")
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces or ')': split after the last one.
    rest = raw[raw.rfind(")") + 2 :].split()
    if not rest or rest[0] in ("Z", "X"):
        return None
    try:
        return int(rest[19])  # rest[0] is field 3, so field 22 is rest[19]
    except (IndexError, ValueError):
        return None


def same_process(pid: int | None, start: int | None) -> bool:
    return pid is not None and start is not None and pid_start_time(pid) == start
