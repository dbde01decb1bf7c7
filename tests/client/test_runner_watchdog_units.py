"""A run's watchdog (client runner/watchdog.py) on its own, with real process groups and no server: it
stops an agent whose lease was not renewed (SIGTERM, then SIGKILL at the lease's end), spares one
whose lease is renewed, and ends with its group. Also: what the runner's help and example config say
an agent's environment holds."""

import re
import subprocess
import sys
import time
from pathlib import Path

from switchyard_client.runner.agent_env import agent_env
from switchyard_client.runner.config import ProviderConfig
from switchyard_client.runner.process import fenced_kill, group_alive
from switchyard_client.runner.state import RunState
from switchyard_client.runner.watchdog import (
    fired_path,
    lease_path,
    lease_times,
    lease_write,
    watchdog_start,
    watchdog_stop,
)

REPO = Path(__file__).resolve().parents[2]
# Notes SIGTERM in $OUT and carries on (as an agent finishing a tool call would); one line a tick.
DEAF = 'trap "echo term >> $OUT" TERM; while :; do date +%s >> "$OUT"; sleep 0.1; done'


def wait_for(check, *, timeout: float = 20, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def agent(tmp_path: Path) -> subprocess.Popen:
    out = tmp_path / "out.txt"
    proc = subprocess.Popen(["sh", "-c", DEAF], env={"OUT": str(out), "PATH": "/usr/bin:/bin"}, start_new_session=True)
    wait_for(lambda: out.exists() and out.read_text().strip(), what="the agent to write")
    return proc


def stamps(tmp_path: Path) -> list[int]:
    return [int(n) for n in re.findall(r"^\d+$", (tmp_path / "out.txt").read_text(), re.M)]


def test_lease_times_end_by_the_lease_and_give_sigterm_a_grace_of_at_most_a_third_of_it():
    assert lease_times(sent_at=1000.7, lease_seconds=60, grace=10) == (1049, 1059)
    assert lease_times(sent_at=1000.0, lease_seconds=6, grace=10) == (1003, 1005)
    assert lease_times(sent_at=1000.0, lease_seconds=60, grace=0) == (1059, 1059)


def test_an_agent_whose_lease_ends_gets_sigterm_then_sigkill_and_the_watchdog_ends(tmp_path):
    proc = agent(tmp_path)
    lease = lease_path(tmp_path, 7)
    now = time.time()
    lease.write_text(f"{int(now)} {int(now) + 2}\n")  # SIGTERM due now, SIGKILL in two seconds
    dog = watchdog_start(lease, proc.pid, "")
    try:
        assert proc.wait(20) == -9  # deaf to SIGTERM: the SIGKILL ended it
        assert "term" in (tmp_path / "out.txt").read_text()
        assert fired_path(lease).exists()
        assert dog.wait(10) == 0 and not group_alive(dog.pid)
    finally:
        watchdog_stop(dog.pid, dog)
        proc.kill()


def test_a_renewed_lease_keeps_the_agent_and_stopping_the_watchdog_leaves_the_agent_alone(tmp_path):
    proc = agent(tmp_path)
    lease = lease_path(tmp_path, 8)
    # SIGTERM in ~6 s: the renewals below may stall for seconds on a loaded machine.
    lease_write(lease, sent_at=time.time(), lease_seconds=8, grace=1)
    first_kill = int(lease.read_text().split()[1])
    dog = watchdog_start(lease, proc.pid, "")
    try:
        # Renewed, as a live runner's heartbeats do, until the agent has written past the first deadline.
        def past_first_deadline():
            lease_write(lease, sent_at=time.time(), lease_seconds=8, grace=1)
            return stamps(tmp_path)[-1] > first_kill + 1

        wait_for(past_first_deadline, timeout=30, what="the agent to outlive its first lease")
        assert proc.poll() is None and dog.poll() is None
        assert "term" not in (tmp_path / "out.txt").read_text() and not fired_path(lease).exists()
        watchdog_stop(dog.pid, dog)
        assert dog.returncode is not None
        # Its `sleep`, killed with it, is reaped by init a moment later (a zombie still answers kill -0).
        wait_for(lambda: not group_alive(dog.pid), timeout=10, what="the watchdog's group to be gone")
        assert proc.poll() is None
    finally:
        watchdog_stop(dog.pid, dog)
        proc.kill()
        proc.wait(5)


def test_processes_that_left_the_agents_group_are_stopped_too(tmp_path):
    """A tool call started detached (its own session, as `setsid` or a detached spawn does) carries
    the attempt's SWITCHYARD_FENCE, and the watchdog finds it by that."""
    out, away = tmp_path / "out.txt", tmp_path / "away.txt"
    script = f'setsid sh -c \'trap "" TERM; while :; do date +%s >> "{away}"; sleep 0.1; done\' & {DEAF}'
    env = {"OUT": str(out), "PATH": "/usr/bin:/bin", "SWITCHYARD_FENCE": "f00d"}
    proc = subprocess.Popen(["sh", "-c", script], env=env, start_new_session=True)
    wait_for(lambda: away.exists() and away.read_text().strip(), what="the detached child to write")
    away_pid = next(
        int(p.name)
        for p in Path("/proc").iterdir()
        if p.name.isdigit() and p.name != str(proc.pid) and _environ_has(p, b"SWITCHYARD_FENCE=f00d")
    )
    lease = lease_path(tmp_path, 10)
    lease.write_text(f"{int(time.time())} {int(time.time()) + 1}\n")
    dog = watchdog_start(lease, proc.pid, "f00d")
    try:
        assert proc.wait(20) == -9
        wait_for(
            lambda: not _environ_has(Path(f"/proc/{away_pid}"), b"SWITCHYARD_FENCE=f00d"), what="the detached child"
        )
        assert dog.wait(10) == 0
    finally:
        watchdog_stop(dog.pid, dog)
        proc.kill()
        fenced_kill("f00d")


def _environ_has(proc: Path, mark: bytes) -> bool:
    """A live process (not a zombie) whose environment holds ``mark``."""
    try:
        state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X") and mark in (proc / "environ").read_bytes().split(b"\0")
    except OSError:
        return False


def test_a_missing_lease_file_stops_the_agent(tmp_path):
    proc = agent(tmp_path)
    dog = watchdog_start(lease_path(tmp_path, 9), proc.pid, "")
    try:
        assert proc.wait(20) == -9
    finally:
        watchdog_stop(dog.pid, dog)
        proc.kill()


def test_the_help_and_the_example_config_name_every_variable_an_agent_gets(tmp_path):
    state = RunState(id=1, attempt=1, provider="shell", session="s", agent_key="k", workdir=str(tmp_path))
    env = agent_env(
        state,
        provider=ProviderConfig(name="shell", command=["true"]),
        url="http://x",
        otlp_endpoint="http://127.0.0.1:9",
        prompt="p",
        hook_dir=tmp_path,
    )
    names = {name for name in env if name.startswith("SWITCHYARD_")}
    assert "SWITCHYARD_ATTEMPT" in names
    help_text = subprocess.run(
        [sys.executable, "-m", "switchyard_client.cli", "runner", "--help"], capture_output=True, text=True, check=True
    ).stdout
    example = (REPO / "switchyard-runner.example.toml").read_text()
    readme = (REPO / "client" / "README.md").read_text()
    for where, text in (
        ("switchyard runner --help", help_text),
        ("the example TOML", example),
        ("client/README.md", readme),
    ):
        missing = sorted(name for name in names if not re.search(rf"\b{name}\b", text))
        assert not missing, f"{where} does not name {missing}"
