"""A run's watchdog: no agent works after its attempt is fenced (SPEC §8), even when its runner died.

The server renews a started run's lease at each heartbeat of its runner, and declares the run lost
once the lease has lapsed by RUNNER_LEASE_MARGIN_SECONDS. The runner writes, after each heartbeat
the server answered (and when the run starts), when that lease ends at the latest as two times in
``<root>/runs/<id>.lease``: when to send SIGTERM and when to send SIGKILL to the agent's process
group. Both count from the moment the request was *sent*, so they fall before the server's own
expiry whatever the network took.

Beside each agent runs a tiny ``sh`` loop (its own session: a Ctrl-C or a kill of the runner does not
reach it) that reads the file, sleeps until the SIGTERM time, reads it again, and, if no live runner
moved it meanwhile, stops the attempt: SIGTERM, then SIGKILL at the SIGKILL time, to the agent's
group and to every process carrying the attempt's SWITCHYARD_FENCE mark (what left the group). A
restarted runner re-adopts the agent by renewing the same file. The loop ends once the group and
the marked processes are gone; the runner stops it when a run ends. Under 2 MB of RSS per run,
mostly shared (``sh`` and its ``sleep``), and two short-lived processes (``date``, ``sleep``) per
lease period, rather than a Python interpreter (9 MB, 3.5 MB of it private) per run.

Times are whole seconds of the wall clock (``date +%s``); the runner rounds down, so the SIGKILL
falls at the latest at the lease's end (and the margin covers the second the loop may sleep past it).
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
from pathlib import Path

# $0 is the lease file ("TERM_AT KILL_AT", seconds since the epoch), $1 the agent's process group,
# $2 the attempt's mark: SWITCHYARD_FENCE=<mark> is in the environment of the agent and of every
# process it starts, also those that left its group (setsid, a detached spawn), found in
# /proc/<pid>/environ. Unreadable or missing lease file (the runner removes it only after stopping
# this loop): stop the agent now. A kill of the loop (the runner's, when the run ends) takes its
# `sleep` with it: same group. The SIGTERM goes process by process, and not to bubblewrap's own (a
# sandboxed agent's group holds them): they die of it and take the sandbox down with the agent still in
# its handler (process.py's terminate_group says more). The SIGKILL goes to the group, and to them too.
SCRIPT = """
lease=$0 group=$1 mark=SWITCHYARD_FENCE=$2
marked() { grep -lzxsF "$mark" /proc/[0-9]*/environ 2>/dev/null | while read -r f; do p=${f#/proc/}; echo "${p%/environ}"; done; }
members() { for f in /proc/[0-9]*/stat; do read -r s < "$f" 2>/dev/null || continue; set -- ${s##*") "}; [ "$3" = "$group" ] && { p=${f#/proc/}; echo "${p%/stat}"; }; done; }
terminate() { for p in $( { members; marked; } | sort -u); do read -r c < "/proc/$p/comm" 2>/dev/null && [ "$c" != bwrap ] && kill -TERM "$p" 2>/dev/null; done; }
stop() { kill -"$1" -"$group" 2>/dev/null; for p in $(marked); do kill -"$1" "$p" 2>/dev/null; done; }
while kill -0 -"$group" 2>/dev/null || [ -n "$(marked)" ]; do
  term=0 kill=0
  read term kill < "$lease" 2>/dev/null
  case "$term$kill" in ''|*[!0-9]*) term=0 kill=0 ;; esac
  now=$(date +%s)
  if [ "$now" -ge "$term" ]; then
    : > "$lease.fired"
    terminate
    while [ "$(date +%s)" -lt "$kill" ] && kill -0 -"$group" 2>/dev/null; do sleep 1; done
    stop KILL
    exit 0
  fi
  sleep $((term - now))
done
"""


def lease_path(folder: Path, run_id: int) -> Path:
    return Path(folder) / f"{int(run_id)}.lease"


def fired_path(lease: Path) -> Path:
    return Path(f"{lease}.fired")


def lease_times(*, sent_at: float, lease_seconds: float, grace: float) -> tuple[int, int]:
    """(SIGTERM at, SIGKILL at), whole seconds: SIGKILL one second before the lease's end (the loop
    reads the clock in whole seconds, so it may act up to a second late), SIGTERM ``grace`` before
    that, but never more than a third of the lease before it (a grace as long as the lease would
    stop every agent at once)."""
    kill = math.floor(sent_at + lease_seconds) - 1
    lead = int(max(0.0, min(grace, lease_seconds / 3)))
    return kill - lead, kill


def lease_write(path: Path, *, sent_at: float, lease_seconds: float, grace: float) -> None:
    """Atomically (temp file, rename): the loop never reads half a line."""
    term, kill = lease_times(sent_at=sent_at, lease_seconds=lease_seconds, grace=grace)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    tmp.write_text(f"{term} {kill}\n")
    os.replace(tmp, path)


def watchdog_start(lease: Path, group: int, fence: str) -> subprocess.Popen:
    """The loop for the agent whose process group is ``group`` and whose processes carry
    SWITCHYARD_FENCE=``fence``; ``lease`` must already be written."""
    return subprocess.Popen(
        ["sh", "-c", SCRIPT, str(lease), str(int(group)), fence],
        cwd="/",
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )


def watchdog_stop(pid: int, popen: subprocess.Popen | None = None) -> None:
    """Stop the loop (and its ``sleep``): SIGKILL to its group, then reap it if it is our child."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    if popen is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            popen.wait(5)


def lease_forget(lease: Path) -> None:
    for path in (lease, fired_path(lease)):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
