"""Issue 24's "Done when" fleet scenario, as one test: real `switchyard runner` processes running the real
Claude Code CLI (tests/runners/claude_cli.py) against the scripted Messages API (fake_anthropic.py),
on one live web process, with SIGKILLs at the seams.

What it starts (marked ``fleet``): the app under uvicorn on a fixed port (killed with SIGKILL and
started again mid-run), three runners of capacity 2 with roots of their own (three machines: `fleet-a`,
killed with SIGKILL and started again with the same root; `fleet-b`, killed with SIGKILL for good while
its agents are inside a long Bash tool call; `fleet-c`, left alone), and eight Claude Code processes:

1. B takes the two "long" tasks: the model asks each agent for a Bash loop that appends a line (run id,
   time) to ``ticks.txt`` in the task's worktree every 0.2 s for 90 s.
2. A and C take the four "gated" tasks: a Bash call, then the model holds its last answer (a gate the
   test opens), so the agents are mid-run at every kill.
3. Once what the model served so far is attributed, B is killed for good and A is killed and started
   again; A re-adopts its two agents.
4. The web process is killed; the gates open, so the four agents finish while the server is away (their
   last telemetry export lands in their runner's relay spool); the web process is started again.
5. The lease sweep runs as beat would (the service, every 0.5 s): B's runs are lost once their lease and
   the margin are past, and the runs that resume them do their work on A or C, in the same worktrees.

It ends with every task done (its last run succeeded, the task in review); B's agents stopped before
their runs were lost (no process with their run's SWITCHYARD_RUN, in the agent's process group or out
of it, alive at the loss; ``ticks.txt`` not growing after it); no process of the test's fleet left once
the runners stop (each carries the test's mark in its environment); and the tokens attributed (the usage rows and GET /api/v1/usage/) equal the tokens the model served.

The lease is short (RUNNER_LEASE_SECONDS=20, margin 2, heartbeats every second) but not the minimum
(5): a lease must outlast the web process's restart on a loaded machine, or every agent's watchdog
would stop it while the server is away (which is right, but not this scenario).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest
from django.db.models import Sum
from django.test import override_settings

from board.models import Task
from config.actors import Actor
from ledger.models import Event, ToolInvocation
from runners.leases import runs_expire_leases
from runners.models import Run
from runners.services import run_queue
from sessions_app.keys import api_key_create
from switchyard_client.runner.process import group_alive
from tests.browser.server import ServerProcess
from tests.factories import AgentFactory, TaskFactory, UserFactory
from tests.runners.claude_cli import claude_env, require_claude
from tests.runners.fake_anthropic import INPUT_TOKENS, OUTPUT_TOKENS, FakeAnthropic, Reply, text, tool_results, tool_use
from tests.runners.live_runner import GIT_ENV, Machine, run_in, wait_for
from tests.worker import FILE_ROOTS
from tests.workspaces.conftest import commit_file, git
from usage.models import UsageRecord
from workspaces.worktrees.services import repository_register

pytestmark = [pytest.mark.fleet, pytest.mark.usefixtures("transactional_db")]

LEASE_SECONDS = 20
MARGIN_SECONDS = 2
SERVER_ENV = {
    "RUNNER_LEASE_SECONDS": str(LEASE_SECONDS),
    "RUNNER_LEASE_MARGIN_SECONDS": str(MARGIN_SECONDS),
    "RUNNER_HEARTBEAT_SECONDS": "1",
}
MARK = "FLEET_TEST_MARK"  # in each runner's environment, so in every process the fleet starts

TICK = 'echo "$SWITCHYARD_RUN $(date +%s.%N)" >> ticks.txt'
LONG = [
    tool_use(
        "Bash",
        {"command": f"for i in $(seq 450); do {TICK}; sleep 0.2; done", "description": "tick", "timeout": 600000},
    ),
    text("Ticked."),
]
# The run that resumes a lost one starts a new conversation whose prompt says so: one tick, and done.
RESUMED = [tool_use("Bash", {"command": TICK, "description": "tick once"}), text("Resumed and ticked.")]
GATED = [tool_use("Bash", {"command": 'echo "$SWITCHYARD_RUN" > gated.txt', "description": "note"}), text("Noted.")]
RESUMING = "You are resuming this work after an interruption"


class FleetModel(FakeAnthropic):
    """The scripted model for many conversations at once: a main conversation's script is chosen by
    the marker its first message (the task's prompt) holds; the answer to a gated conversation's
    request that carries the Bash result waits until the test opens its gate. Counts what it served."""

    def __init__(self, *, gated: list[str]):
        super().__init__([*LONG, *RESUMED, *GATED])  # the tools a main conversation is offered
        self.gates = {marker: (threading.Event(), threading.Event()) for marker in gated}  # (held, go)
        self.served = [0, 0, 0]  # messages, input tokens, output tokens

    def reply_for(self, body: dict) -> tuple[Reply, bool]:
        if not self._is_main(body):
            return super().reply_for(body)
        first = json.dumps((body.get("messages") or [{}])[0])
        marker = next((m for m in self.gates if m in first), None)
        script = RESUMED if RESUMING in first else LONG if "FLEET-LONG" in first else GATED
        index = tool_results(body, self.prefix)
        if marker is not None and script is GATED and index == 1:
            held, go = self.gates[marker]
            held.set()
            go.wait(300)
        return (script[index] if index < len(script) else text("(the script has ended)")), True

    def message(self, body: dict, reply: Reply, index: int):
        with self._lock:
            self.served[0] += 1
            self.served[1] += INPUT_TOKENS
            self.served[2] += OUTPUT_TOKENS
        return super().message(body, reply, index)

    def stop(self) -> None:
        for _, go in self.gates.values():
            go.set()
        super().stop()


class Web:
    """The app on a fixed port, killed with SIGKILL and started again on it."""

    def __init__(self, base: Path):
        self.roots = {name: base / "roots" / name.lower() for name in FILE_ROOTS}
        for path in self.roots.values():
            path.mkdir(parents=True)
        self.server = ServerProcess(base / "server.log", env=SERVER_ENV)
        self.url = self.server.url

    def start(self) -> None:
        with override_settings(**self.roots):
            self.server.start()

    def kill9(self) -> None:
        self.server.process.kill()
        self.server.process.wait(10)
        self.server.log.close()

    def stop(self) -> None:
        if self.server.process is not None and self.server.process.poll() is None:
            self.server.stop()


def marked(name: str, value: str) -> list[int]:
    """Live processes (not zombies) whose environment holds ``name=value``."""
    found = []
    needle = f"{name}={value}".encode()
    for proc in Path("/proc").iterdir():
        try:
            if not proc.name.isdigit() or int(proc.name) == os.getpid():
                continue
            if (proc / "stat").read_text().rsplit(")", 1)[1].split()[0] in "ZX":
                continue
            if needle in (proc / "environ").read_bytes().split(b"\0"):
                found.append(int(proc.name))
        except (OSError, IndexError):
            continue
    return found


def environ(pid: int) -> dict[str, str]:
    with contextlib.suppress(OSError):
        pairs = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        return dict(p.decode(errors="replace").partition("=")[::2] for p in pairs if b"=" in p)
    return {}


def ticks(path: Path) -> list[tuple[int, float]]:
    """(run id, time) of each whole line of a worktree's ticks.txt."""
    text_ = path.read_text() if path.exists() else ""
    return [(int(m[1]), float(m[2])) for m in re.finditer(r"^(\d+) (\d+\.\d+)$", text_, re.MULTILINE)]


def ledger(run: Run) -> list[Event]:
    return list(Event.objects.filter(subject_type="run", subject_id=str(run.pk)).order_by("id"))


def attributed() -> tuple[int, int, int]:
    sums = UsageRecord.objects.aggregate(i=Sum("input_tokens"), o=Sum("output_tokens"))
    return UsageRecord.objects.count(), sums["i"] or 0, sums["o"] or 0


def spooled(machine: Machine) -> list[Path]:
    return sorted((machine.root / "otlp-spool").glob("*.export"))


@pytest.fixture
def claude_bin(tmp_path):
    binary = require_claude()
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "claude").symlink_to(binary.resolve())
    return folder


@pytest.fixture
def repository(tmp_path):
    clone = tmp_path / "code" / "fleet-shop"
    clone.mkdir(parents=True)
    git(clone, "init", "-q", "-b", "main")
    commit_file(clone, "README.md", "# fleet-shop\n", "Initial commit")
    repository, _ = repository_register(path=str(clone))
    return repository


@pytest.fixture
def fleet(tmp_path, claude_bin, settings):
    """The web process, the model and the machines; every process they started is stopped at the end,
    also when the test fails: the runners, the web process, and whatever carries the fleet's mark."""
    settings.RUNNER_LEASE_SECONDS = LEASE_SECONDS  # the server's, for the sweep this process runs
    settings.RUNNER_LEASE_MARGIN_SECONDS = MARGIN_SECONDS
    mark = uuid.uuid4().hex
    web = Web(tmp_path / "web")
    model = FleetModel(gated=[f"FLEET-GATED-{n}" for n in range(1, 5)])
    machines: dict[str, Machine] = {}

    def machine(name: str) -> Machine:
        provider_env = claude_env(
            home=tmp_path / name / "claude-home",
            api_url=model.url,
            SWITCHYARD_HOOK_BUDGET="5",
            OTEL_LOGS_EXPORT_INTERVAL="500",  # Claude Code's usage reaches the relay within half a second
            **GIT_ENV,
        )
        provider_env.pop("PATH")  # the runner's, with the CLI on it
        path = f"{claude_bin}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}"
        made = Machine(
            tmp_path / "machines",
            web.url,
            name,
            capacity=2,
            providers={"claude": {"env": provider_env}},
            env={"PATH": path, MARK: mark},
        )
        machines[name] = made
        return made

    try:
        model.start()
        web.start()
        yield web, model, machine, mark
    finally:
        model.stop()
        for made in machines.values():
            made.cleanup()
        for pid in marked(MARK, mark):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        web.stop()


def test_a_fleet_with_killed_runners_and_a_killed_web_process_loses_nothing(fleet, repository):
    web, model, machine, mark = fleet
    person = Actor(user=UserFactory(username="po", is_staff=True))
    a, b, c = machine("fleet-a"), machine("fleet-b"), machine("fleet-c")
    every = [a, b, c]

    def queue(title: str) -> Run:
        task = TaskFactory(title=title, description="Keep it short.", repository=repository)
        return run_queue(actor=person, task=task, provider="claude")

    def of_run(pk: int) -> list[int]:
        """The live processes of run ``pk``'s attempts, also those that left the agent's process group."""
        return [pid for pid in marked(MARK, mark) if environ(pid).get("SWITCHYARD_RUN") == str(pk)]

    def worktree(run: Run) -> Path:
        return Path(os.path.realpath(Path(repository.path).parent / f"task-{run.task_id}"))

    # 1. B alone takes the long tasks; each agent ticks in its worktree, inside its Bash tool call.
    b_proc = b.start()
    long_runs = [queue(f"FLEET-LONG-{n}: tick for a while") for n in (1, 2)]
    for run in long_runs:
        wait_for(lambda run=run: run_in(run, "running"), timeout=120, what="a long run to start", machines=every)
        assert run.runner.name == "fleet-b"
        wait_for(
            lambda run=run: len(ticks(worktree(run) / "ticks.txt")) >= 3, timeout=120, what="ticks", machines=every
        )

    # 2. A and C (B is full) take the gated tasks; each agent ran its Bash call and waits on the model.
    a_proc, _ = a.start(), c.start()
    gated_runs = [queue(f"FLEET-GATED-{n}: note the run") for n in range(1, 5)]
    for held, _ in model.gates.values():
        wait_for(held.is_set, timeout=180, what="the gated agents to wait on the model", machines=every)
    for run in gated_runs:
        run.refresh_from_db()
    assert sorted(run.runner.name for run in gated_runs) == ["fleet-a", "fleet-a", "fleet-c", "fleet-c"]
    assert all(run.status == "running" for run in gated_runs)

    # What the model served so far has reached the server (B's relay would keep the rest on a disk that
    # never comes back): the one point where the test waits for usage before a kill.
    wait_for(lambda: attributed()[1:] == tuple(model.served[1:]), timeout=60, what="usage so far", machines=every)

    # 3. B dies for good, its agents mid-tool; A dies and comes back, and re-adopts its agents.
    groups = {run.pk: b.state(run)["pid"] for run in long_runs}
    assert all(groups.values()) and all(of_run(pk) for pk in groups)
    b_proc.kill9()
    b_killed_at = time.time()
    a_proc.kill9()
    a_again = a.start()
    for run in gated_runs:
        if run.runner.name == "fleet-a":
            wait_for(lambda run=run: f"run {run.pk} re-adopted" in a_again.output(), timeout=60, what="re-adoption")

    # 4. The web process dies; the gated agents finish while it is away, and their runners keep their
    # last telemetry on disk; then it comes back on the same port.
    web.kill9()
    for _, go in model.gates.values():
        go.set()
    owners = {run.pk: a if run.runner.name == "fleet-a" else c for run in gated_runs}
    for run in gated_runs:
        exit_file = Path(owners[run.pk].state(run)["exit_path"])
        wait_for(exit_file.exists, timeout=60, what="a gated agent to exit while the server is away", machines=every)
    assert spooled(a) or spooled(c), "no telemetry was made while the server was away"
    web.start()

    # 5. The lease sweep, as beat runs it; just before each pass, are B's agents' processes alive?
    alive_at_loss: dict[int, bool] = {}

    def every_task_done() -> bool:
        alive = {pk: group_alive(groups[pk]) or bool(of_run(pk)) for pk in groups}
        runs_expire_leases()
        for run in long_runs:
            if run.pk not in alive_at_loss and run_in(run, "lost"):
                alive_at_loss[run.pk] = alive[run.pk]
        finals = [Run.objects.filter(task_id=run.task_id).order_by("-id").first() for run in long_runs + gated_runs]
        return all(final.status == "succeeded" for final in finals)

    wait_for(every_task_done, timeout=240, what="every task to be done", machines=every, interval=0.5)

    # Every task succeeded: the gated ones at their first attempt, the long ones on A or C, resuming in
    # the same worktree (its claims were handed over when the run was lost).
    for run in gated_runs:
        run.refresh_from_db()
        assert (run.status, run.attempt, run.error) == ("succeeded", 1, ""), run.error
        assert (worktree(run) / "gated.txt").read_text() == f"{run.pk}\n"
        # Run once: started once (A's re-adopted, not started again), never lost, its Bash call once.
        assert [e.name for e in ledger(run) if e.name in ("run.started", "run.lost")] == ["run.started"]
        calls = ToolInvocation.objects.filter(session_id=run.session_id)
        assert list(calls.values_list("tool_name", "status")) == [("Bash", "success")]
    for run in long_runs:
        run.refresh_from_db()
        assert run.status == "lost" and run.runner.name == "fleet-b"
        again = Run.objects.get(resumes=run)
        assert (again.status, again.error) == ("succeeded", ""), again.error
        assert again.runner.name in ("fleet-a", "fleet-c") and Path(again.workdir) == worktree(run)
    tasks = Task.objects.filter(pk__in=[run.task_id for run in long_runs + gated_runs])
    assert sorted(tasks.values_list("status", flat=True)) == ["review"] * 6
    assert not any("could not prepare the worktree" in m.output() for m in every)

    # No tool ran after its attempt was fenced: B's agents (and their Bash loops) were gone when the
    # sweep declared their runs lost, and the last tick of each came before the loss.
    assert alive_at_loss == {run.pk: False for run in long_runs}
    losses = []
    for run in long_runs:
        lost_at = Event.objects.get(name="run.lost", subject_type="run", subject_id=str(run.pk)).created_at
        losses.append(round(lost_at.timestamp() - b_killed_at, 1))
        lines = ticks(worktree(run) / "ticks.txt")
        mine = [at for pk, at in lines if pk == run.pk]
        assert len(mine) >= 3 and max(mine) < lost_at.timestamp(), (mine[-3:], lost_at)
        assert [pk for pk, _ in lines] == [run.pk] * len(mine) + [Run.objects.get(resumes=run).pk]

    # No process of an attempt is left (the runners A and C still up), and none of the fleet's once
    # they stop: no agent, no tool call, no watchdog, no relay keeper (B's too).
    leftovers = [pid for pid in marked(MARK, mark) if "SWITCHYARD_RUN" in environ(pid)]  # any run's
    assert leftovers == [], [Path(f"/proc/{pid}/cmdline").read_bytes() for pid in leftovers]
    a.processes[-1].stop()
    c.processes[-1].stop()
    # The telemetry relays' keepers end on their own a second or two after their runner (and agents).
    wait_for(lambda: not marked(MARK, mark), timeout=15, what=f"the fleet's processes to end: {marked(MARK, mark)}")

    # Tokens attributed equal tokens served: every export reached the server once, the ones made
    # while it was away included.
    served = tuple(model.served[1:])
    wait_for(lambda: attributed()[1:] == served, timeout=60, what=f"{served} tokens attributed, {attributed()}")
    assert not spooled(a) and not spooled(c)
    staff = api_key_create(agent=AgentFactory(slug="fleet-auditor"), scopes=["agent", "orchestrate"]).key
    answer = httpx.get(
        f"{web.url}/api/v1/usage/",
        params={"group_by": "task"},
        headers={"Authorization": f"Bearer {staff}"},
        timeout=20,
    )
    assert answer.status_code == 200, answer.text[:500]
    rows = {row["key"]: row for row in answer.json()["results"]}
    assert (sum(r["input_tokens"] for r in rows.values()), sum(r["output_tokens"] for r in rows.values())) == served
    # Each task's runs have their usage: none ended with its last export lost.
    assert all(rows[str(run.task_id)]["input_tokens"] >= 2 * INPUT_TOKENS for run in long_runs + gated_runs), rows
    print(f"fleet: B's runs lost {losses} s after its kill; {model.served[0]} messages, {served} tokens served")


def test_the_usage_of_an_agent_that_ends_while_its_runner_is_down_is_attributed(fleet, repository):
    """Found by the scenario: the relay listened inside the runner, so the last export of an agent that
    ended while its runner was down was refused (connection refused) and lost (120 of 240 tokens here).
    Its listener now runs in a keeper process that outlives the runner (client runner/otlp_keeper.py)."""
    web, model, machine, mark = fleet
    a = machine("fleet-a")
    first = a.start()
    task = TaskFactory(title="FLEET-GATED-1: note the run", description="Keep it short.", repository=repository)
    run = run_queue(actor=Actor(user=UserFactory(username="po", is_staff=True)), task=task, provider="claude")
    held, go = model.gates["FLEET-GATED-1"]
    wait_for(held.is_set, timeout=180, what="the agent to wait on the model", machines=[a])
    wait_for(lambda: attributed()[1:] == tuple(model.served[1:]), timeout=60, what="usage so far", machines=[a])

    # The runner dies; its agent gets the model's last answer and ends before the runner is back.
    first.kill9()
    go.set()
    wait_for(Path(a.state(run)["exit_path"]).exists, timeout=60, what="the agent to end", machines=[a])
    assert spooled(a), "the agent's last export was not kept while its runner was down"
    a.start()
    wait_for(lambda: run_in(run, "succeeded", "failed"), timeout=120, what="the run to end", machines=[a])
    assert run.status == "succeeded", run.error

    # The run ends once its runner's relay forwarded every export of it it took (worker.py, settle).
    assert not spooled(a)
    assert attributed()[1:] == tuple(model.served[1:])
