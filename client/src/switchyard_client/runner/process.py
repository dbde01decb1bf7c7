"""Starting an agent in its own process group, watching it, stopping it, and learning its exit code
even when the runner that started it has died and a new one adopted it.

The agent runs under a tiny ``sh`` wrapper that writes the exit code to a file when the agent
exits (a process that is not our child cannot be waited for). The wrapper leads the process group
(``start_new_session``), so SIGTERM to the group reaches the agent and all its children at once
(a sandbox's bubblewrap excepted: terminate_group).
The wrapper itself outlives that SIGTERM (a trap, which runs only once the agent has exited; a
trapped signal is reset to its default in the agent, unlike an ignored one): it stays the agent's
parent, so the agent is reaped the moment it exits rather than whenever init gets round to it, and
its code is recorded (128+N for a signal, which a restarted runner takes as "killed: resume").
A SIGKILL of the group leaves no file at all, which also reads as killed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

# $0 is the exit file; the agent's argv follows. Written to a temp name and renamed, so a reader
# never sees half a number.
WRAPPER = 'trap : TERM INT HUP; "$@"; code=$?; echo "$code" > "$0.tmp" && mv -f "$0.tmp" "$0"; exit "$code"'


def spawn(
    argv: list[str], *, cwd: str, env: dict[str, str], log_path: Path, exit_path: Path, stdin: bytes | None = None
) -> subprocess.Popen:
    """Start ``argv`` with stdout and stderr appended to ``log_path``; the child's pid is also its
    process group id. ``stdin``: what it reads on its standard input (else nothing: /dev/null), from
    a file with no name (nothing left on disk, and a restarted runner has nothing to feed). Raises
    OSError when the program cannot be found or started."""
    exit_path.unlink(missing_ok=True)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log, tempfile.TemporaryFile() as given:
        if stdin is not None:
            given.write(stdin)
            given.seek(0)
        return subprocess.Popen(
            ["sh", "-c", WRAPPER, str(exit_path), *argv],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL if stdin is None else given,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )


def read_exit_file(exit_path: str | Path) -> int | None:
    try:
        return int(Path(exit_path).read_text().strip())
    except (OSError, ValueError):
        return None


def signal_group(pid: int, sig: int) -> bool:
    """Send ``sig`` to the process group ``pid`` leads; False when it is gone."""
    try:
        os.killpg(pid, sig)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return False


def group_members(pid: int) -> dict[int, str] | None:
    """The live members of process group ``pid``, each with its name (``comm``); None without /proc.
    Zombies do not count: an orphan waits for init to reap it, which some container inits do only
    every second or so."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    members = {}
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                raw = fh.read().decode("ascii", "replace")
        except OSError:
            continue
        name, rest = raw[raw.find("(") + 1 : raw.rfind(")")], raw[raw.rfind(")") + 2 :].split()
        # rest[0] is the state (field 3), rest[2] the process group (field 5).
        if len(rest) > 2 and rest[2] == str(pid) and rest[0] not in ("Z", "X"):
            members[int(entry)] = name
    return members


def group_alive(pid: int) -> bool:
    """Whether any live member of process group ``pid`` is left (zombies do not count)."""
    members = group_members(pid)
    if members is None:  # no /proc: the signal test, zombies included
        try:
            os.killpg(pid, 0)
            return True
        except (ProcessLookupError, PermissionError):
            return False
    return bool(members)


# bubblewrap's own processes in a sandboxed agent's group: the one outside, which dies of a SIGTERM
# (it has no handler) and takes the sandbox's init with it (--die-with-parent), and that init, whose
# death ends every process in the sandbox at once. A SIGTERM must reach the agent, not them: they
# end when the agent has, and pass its exit code on.
SANDBOX_PROCESS = "bwrap"


def terminate_group(pid: int) -> bool:
    """SIGTERM to process group ``pid`` so its agent can save its work and end; False when it is gone.

    A group with bubblewrap in it gets the SIGTERM member by member, bubblewrap's own left out: a
    SIGTERM to the whole group killed the sandbox at once, and with it an agent still in its handler."""
    members = group_members(pid)
    if not members or SANDBOX_PROCESS not in members.values():
        return signal_group(pid, signal.SIGTERM)
    for member, name in members.items():
        if name != SANDBOX_PROCESS:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(member, signal.SIGTERM)
    return True


def stop_group(pid: int, *, grace: float, reap=None, poll: float = 0.05) -> None:
    """SIGTERM to the group (terminate_group), then SIGKILL to whatever of it is left after ``grace`` seconds.

    The group is watched, not the wrapper: ``sh`` dies of SIGTERM at once while the agent may take
    a moment to save its work. ``reap`` (the Popen's poll, for our own child) keeps a dead wrapper
    from lingering as a zombie, which would still count as a member of the group."""
    if not terminate_group(pid):
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if reap is not None:
            reap()
        if not group_alive(pid):
            return
        time.sleep(poll)
    signal_group(pid, signal.SIGKILL)
    if reap is not None:
        reap()


def fenced_kill(fence: str) -> int:
    """SIGKILL every process whose environment holds SWITCHYARD_FENCE=``fence`` (an attempt's agent
    and all it started, also what left its process group); how many. Nothing without /proc."""
    if not fence:
        return 0
    mark = f"SWITCHYARD_FENCE={fence}".encode()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return 0
    killed = 0
    for entry in entries:
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                if mark not in fh.read().split(b"\0"):
                    continue
            os.kill(int(entry), signal.SIGKILL)
            killed += 1
        except (OSError, ValueError):
            continue
    return killed


def describe_exit(code: int | None) -> str:
    if code is None:
        return "exit code unknown"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    if 128 < code < 160:  # the wrapper's $? for an agent killed by a signal
        try:
            return f"exit code {code} (killed by {signal.Signals(code - 128).name})"
        except ValueError:
            pass
    return f"exit code {code}"
