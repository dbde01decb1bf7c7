"""No agent works after its attempt is fenced (SPEC §8): a runner killed -9 leaves its agents to their
watchdogs (client runner/watchdog.py), which stop them by the lease's end, before the server may
declare the run lost (lease + RUNNER_LEASE_MARGIN_SECONDS); a runner started again within the lease
re-adopts its agent, which its watchdog spares.

Real processes throughout: a live server with a short lease (RUNNER_LEASE_SECONDS=12, heartbeats
every second), real `switchyard runner` processes, agents that are shell loops writing to a file.
Lease expiry is Celery beat's job in production; here the test calls the service in a loop, as beat
would, and looks at the agent's process group before each call.
"""

import os
import re
import signal
from pathlib import Path

import pytest

from config.actors import Actor
from ledger.models import Event
from runners.leases import runs_expire_leases
from runners.services import run_queue
from switchyard_client.runner.process import group_alive
from tests.client.live import server_roots  # noqa: F401
from tests.factories import TaskFactory, UserFactory
from tests.runners.live_runner import Machine, run_in, short_lease_server, wait_for

pytestmark = pytest.mark.usefixtures("transactional_db")

LEASE_SECONDS = 12
# Deaf to SIGTERM, as an agent inside a long tool call may be (`trap "" TERM` is inherited by its
# `sleep`s): only the watchdog's SIGKILL stops it. One line per tick, with the time it was written.
# Its tool call runs detached (a session of its own, as `setsid` or a detached spawn makes), outside
# the agent's process group, writing to $OUT.tool.
LOOP = 'trap "" TERM; while :; do date +%s.%N >> "$1"; sleep 0.1; done'
STUBBORN = f'setsid sh -c \'{LOOP}\' tool "$OUT.tool" & set -- "$OUT"; {LOOP}'
# Writes until the test creates $GO, then ends well.
UNTIL_GO = 'while [ ! -e "$GO" ]; do date +%s.%N >> "$OUT"; sleep 0.1; done'


@pytest.fixture(scope="module")
def sy_server(django_db_setup, django_db_blocker, server_roots, tmp_path_factory):  # noqa: F811
    with short_lease_server(
        django_db_blocker=django_db_blocker,
        server_roots=server_roots,
        tmp_path_factory=tmp_path_factory,
        lease_seconds=LEASE_SECONDS,
    ) as server:
        yield server


@pytest.fixture
def person():
    return Actor(user=UserFactory(username="po", is_staff=True))


@pytest.fixture
def machine(tmp_path, sy_server, settings):
    settings.RUNNER_LEASE_SECONDS = LEASE_SECONDS  # the server's, for the expiry called here
    made: list[Machine] = []

    def make(script: str) -> Machine:
        env = {"OUT": str(tmp_path / "agent-out.txt"), "GO": str(tmp_path / "go")}
        shell = {"command": ["sh", "-c", script], "env": env}
        made.append(Machine(tmp_path, sy_server.url, "m-1", capacity=1, providers={"shell": shell}))
        # The agents write to a file of the test's, outside any worktree: no sandbox (tests/client/
        # test_runner_sandbox.py shows the fence and the group signal reach a sandboxed agent).
        made[-1].runner_table["sandbox"] = False
        made[-1].write()
        made[-1].out, made[-1].go = Path(env["OUT"]), Path(env["GO"])
        return made[-1]

    yield make
    for item in made:
        item.cleanup()


def fenced(mark: str) -> list[int]:
    """Live processes (not zombies) whose environment holds SWITCHYARD_FENCE=``mark``."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            alive = proc.name.isdigit() and (proc / "stat").read_text().rsplit(")", 1)[1].split()[0] not in "ZX"
            if alive and f"SWITCHYARD_FENCE={mark}".encode() in (proc / "environ").read_bytes().split(b"\0"):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def lines(path: Path) -> list[float]:
    text = path.read_text() if path.exists() else ""
    return [float(line) for line in text.splitlines() if re.fullmatch(r"\d+\.\d+", line)]


def test_a_killed_runners_agent_is_dead_before_its_run_is_lost(person, machine):
    m = machine(STUBBORN)
    run = run_queue(actor=person, task=TaskFactory(title="Outlive your runner"), provider="shell")
    runner = m.start()
    wait_for(lambda: run_in(run, "running"), timeout=60, what="the run to start", machines=[m])
    state = wait_for(lambda: m.state(run).get("pid") and m.state(run), what="the agent", machines=[m])
    tool = Path(f"{m.out}.tool")
    wait_for(lambda: len(lines(m.out)) >= 3 and len(lines(tool)) >= 3, what="the agent to write", machines=[m])
    runner.kill9()
    state = m.state(run)
    # The agent and its detached tool call live on without their runner, for now.
    assert group_alive(state["pid"]) and len(fenced(state["fence"])) >= 2

    # Beat's expiry pass, in a loop; the agent's processes are looked at just before each pass.
    alive_at_loss = None

    def lost():
        nonlocal alive_at_loss
        alive = group_alive(state["pid"]) or bool(fenced(state["fence"]))
        runs_expire_leases()
        if run_in(run, "lost"):
            alive_at_loss = alive
            return True
        return False

    wait_for(lost, timeout=LEASE_SECONDS + 40, what="the run to be lost", machines=[m], interval=0.2)
    assert alive_at_loss is False, "the agent was still alive when its run was declared lost"
    # The file stopped growing before the loss was recorded, and it does not grow after.
    lost_at = Event.objects.get(name="run.lost", subject_type="run", subject_id=str(run.pk)).created_at.timestamp()
    written, tool_written = lines(m.out), lines(tool)
    assert written[-1] < lost_at and m.out.stat().st_mtime < lost_at
    assert tool_written[-1] < lost_at and tool.stat().st_mtime < lost_at
    assert not group_alive(state["pid"]) and not fenced(state["fence"])
    assert (lines(m.out), lines(tool)) == (written, tool_written)
    # The watchdog ended with its work done.
    assert state.get("watchdog_pid")
    wait_for(lambda: not group_alive(state["watchdog_pid"]), timeout=10, what="the watchdog to end")


def test_a_runner_restarted_within_the_lease_readopts_its_agent_which_the_watchdog_spares(person, machine):
    m = machine(UNTIL_GO)
    run = run_queue(actor=person, task=TaskFactory(title="Come back in time"), provider="shell")
    first = m.start()
    wait_for(lambda: run_in(run, "running"), timeout=60, what="the run to start", machines=[m])
    state = wait_for(lambda: m.state(run).get("pid") and m.state(run), what="the agent", machines=[m])
    # Four seconds of run or more before the runner dies: its duration, checked at the end, counts them.
    wait_for(lambda: len(lines(m.out)) >= 40, what="the agent to write", machines=[m])
    first.kill9()
    state = m.state(run)
    lease = m.root / "runs" / f"{run.pk}.lease"
    _, kill_at = (int(n) for n in lease.read_text().split())  # the dead runner's last renewal
    second = m.start()
    wait_for(lambda: f"run {run.pk} re-adopted" in second.output(), timeout=60, what="re-adoption", machines=[m])
    # The agent writes on past the dead runner's lease: the new runner renewed it.
    wait_for(lambda: lines(m.out)[-1] > kill_at + 2, timeout=LEASE_SECONDS + 20, what="the agent past the old lease")
    assert group_alive(state["pid"])
    assert int(lease.read_text().split()[1]) > kill_at
    assert not (m.root / "runs" / f"{run.pk}.lease.fired").exists()
    # The same watchdog as before: it outlived the first runner.
    assert m.state(run)["watchdog_pid"] == state["watchdog_pid"] and group_alive(state["watchdog_pid"])
    runs_expire_leases()
    assert run_in(run, "running")

    m.go.touch()
    wait_for(lambda: run_in(run, "succeeded", "failed"), timeout=60, what="the run to end", machines=[m])
    assert (run.status, run.attempt) == ("succeeded", 1), (run.error, m.output())
    assert not Event.objects.filter(name="run.lost", subject_id=str(run.pk)).exists()
    # Its watchdog was stopped with the run, and its files are gone.
    wait_for(lambda: not group_alive(state["watchdog_pid"]), timeout=10, what="the watchdog to stop")
    # The runner logs the run's end last: after it reported it and then forgot the run's files
    # (reporting first, so a crash loses nothing).
    ended = wait_for(
        lambda: re.search(rf"run {run.pk} succeeded after ([\d.]+) s", second.output()),
        timeout=10,
        what="the runner to log the end",
    )
    assert not lease.exists() and not (m.root / "runs" / f"{run.pk}.json").exists()
    # The duration logged counts from the agent's start, not from its re-adoption.
    written = lines(m.out)
    took = float(ended.group(1))
    assert took >= written[-1] - written[0] - 0.1, (took, written[-1] - written[0])


def test_a_watchdog_killed_with_its_runner_is_started_again_on_readoption(person, machine):
    m = machine(UNTIL_GO)
    run = run_queue(actor=person, task=TaskFactory(title="Lose the dog"), provider="shell")
    first = m.start()
    wait_for(lambda: run_in(run, "running"), timeout=60, what="the run to start", machines=[m])
    wait_for(lambda: len(lines(m.out)) >= 3, what="the agent to write", machines=[m])
    first.kill9()
    state = m.state(run)
    os.killpg(state["watchdog_pid"], signal.SIGKILL)  # the machine's OOM killer took it, say
    wait_for(lambda: not group_alive(state["watchdog_pid"]), what="the old watchdog to die")
    second = m.start()
    wait_for(lambda: f"run {run.pk} re-adopted" in second.output(), timeout=60, what="re-adoption", machines=[m])
    new = wait_for(lambda: m.state(run).get("watchdog_pid") != state["watchdog_pid"] and m.state(run), what="a new one")
    assert group_alive(new["watchdog_pid"]) and group_alive(state["pid"])
    # It watches the same agent, with the same mark: its command line names both.
    argv = Path(f"/proc/{new['watchdog_pid']}/cmdline").read_bytes().split(b"\0")
    assert str(state["pid"]).encode() in argv and state["fence"].encode() in argv

    m.go.touch()
    wait_for(lambda: run_in(run, "succeeded", "failed"), timeout=60, what="the run to end", machines=[m])
    assert (run.status, run.attempt) == ("succeeded", 1), (run.error, m.output())
    wait_for(lambda: not group_alive(new["watchdog_pid"]), timeout=10, what="the new watchdog to stop")
