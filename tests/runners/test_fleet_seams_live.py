"""The fleet's seams (issue 24, §1), with real `switchyard runner` processes on one live server.

- A lost run's worktree goes to the attempt that resumes it: a task of a repository on the server's
  machine; the first runner's agent reaches the task's worktree, then the runner and its agent are
  killed with SIGKILL and never come back; once the lease lapses the run is lost, and the run queued
  to resume it prepares the same worktree on the other runner and finishes there.
- A run handed out and never acknowledged goes back to the queue: a runner killed right after its
  long poll handed it a run, restarted with the same root, has no record of it; it says so, the run
  is queued again, and the runner takes it again and finishes it.

The server runs with a short lease (RUNNER_LEASE_SECONDS=10, heartbeats every second), so a lease
lapses within the test; lease expiry is Celery beat's job in production, called here as the service.
"""

import os
import signal
from pathlib import Path

import httpx
import pytest

from board.models import Task
from config.actors import Actor
from ledger.models import Event
from runners.leases import runs_expire_leases
from runners.models import Run, Runner
from runners.services import run_queue
from tests.client.live import server_roots  # noqa: F401
from tests.factories import TaskFactory, UserFactory
from tests.runners.live_runner import Machine, run_in, short_lease_server, wait_for
from tests.workspaces.conftest import commit_file, git
from workspaces.models import Worktree
from workspaces.worktrees.services import repository_register

pytestmark = pytest.mark.usefixtures("transactional_db")

LEASE_SECONDS = 10  # short, yet longer than a heartbeat delayed by a loaded 2-core machine (5 s was not: CI)
# Each attempt leaves its mark in the folder it works in (its cwd: the task's worktree).
STAY = {"command": ["sh", "-c", "echo attempt $SWITCHYARD_ATTEMPT > from-$MACHINE.txt; exec sleep 120"]}
FINISH = {"command": ["sh", "-c", "echo done > from-$MACHINE.txt"]}


@pytest.fixture(scope="module")
def sy_server(django_db_setup, django_db_blocker, server_roots, tmp_path_factory):  # noqa: F811
    """The app with a short lease, so a runner that dies loses its runs within seconds."""
    with short_lease_server(
        django_db_blocker=django_db_blocker,
        server_roots=server_roots,
        tmp_path_factory=tmp_path_factory,
        lease_seconds=LEASE_SECONDS,
    ) as server:
        yield server


@pytest.fixture
def machines(tmp_path, sy_server):
    made: list[Machine] = []

    def make(name: str, command: dict) -> Machine:
        shell = {**command, "env": {"MACHINE": name}}
        made.append(Machine(tmp_path / "machines", sy_server.url, name, capacity=2, providers={"shell": shell}))
        return made[-1]

    yield make
    for machine in made:
        machine.cleanup()


@pytest.fixture
def repository(tmp_path):
    clone = tmp_path / "code" / "demo-shop"
    clone.mkdir(parents=True)
    git(clone, "init", "-q", "-b", "main")
    commit_file(clone, "README.md", "# demo-shop\n", "Initial commit")
    repository, _ = repository_register(path=str(clone))
    return repository


def test_the_run_that_resumes_a_lost_run_prepares_its_worktree_on_another_runner(
    machines,
    repository,
    settings,
):
    settings.RUNNER_LEASE_SECONDS = LEASE_SECONDS  # the server's, for the expiry called here
    dead, alive = machines("m-dead", STAY), machines("m-alive", FINISH)
    task = TaskFactory(title="Outlive your runner", repository=repository)
    run = run_queue(actor=Actor(user=UserFactory(username="po", is_staff=True)), task=task, provider="shell")
    doomed = dead.start()
    tree = Path(os.path.realpath(Path(repository.path).parent / f"task-{task.pk}"))
    # The first attempt reached its worktree: claimed it, and its agent wrote there.
    wait_for(lambda: run_in(run, "running"), timeout=60, what="the run to start", machines=[dead])
    wait_for(lambda: (tree / "from-m-dead.txt").exists(), what="the agent to write in its worktree", machines=[dead])
    worktree = Worktree.objects.select_related("holder").get(real_path=str(tree))
    assert worktree.holder.slug == "shell-at-m-dead"
    # The machine dies: the runner and its agent, and neither comes back.
    pid = dead.state(run)["pid"]
    doomed.kill9()
    os.killpg(pid, signal.SIGKILL)
    alive.start()

    def lost():
        runs_expire_leases()
        return run_in(run, "lost")

    wait_for(lost, timeout=LEASE_SECONDS + 30, what="the lease to lapse", machines=[alive], interval=0.5)

    # Expiry keeps running, as beat does: the dead runner's last long poll may still take the new run
    # into a closed connection; its short lease then lapses and the run goes back to the queue.
    again = Run.objects.get(resumes=run)

    def ended():
        runs_expire_leases()
        return run_in(again, "succeeded", "failed")

    wait_for(ended, timeout=60, what="the resuming run to end", machines=[alive], interval=0.5)
    assert (again.status, again.runner.name, again.error) == ("succeeded", "m-alive", "")
    # It worked in the same worktree, which it claimed and gave back.
    assert again.workdir == str(tree)
    assert (tree / "from-m-alive.txt").read_text() == "done\n"
    assert (tree / "from-m-dead.txt").read_text() == "attempt 1\n"
    worktree.refresh_from_db()
    assert (worktree.holder_id, worktree.status) == (None, "active")
    assert Task.objects.get(pk=task.pk).status == "review"
    assert "could not prepare the worktree" not in alive.output()


def test_a_run_handed_to_a_runner_killed_before_it_noted_it_is_queued_again_and_done(machines, sy_server):
    machine = machines("m-restart", FINISH)
    first = machine.start()
    wait_for(
        lambda: Runner.objects.filter(name="m-restart", status="online").exists(),
        what="the runner to come online",
        machines=[machine],
    )
    # Killed while its long poll was open; the poll's answer, a run, went nowhere: the server may still
    # hold that poll and answer it into the closed connection, else the test polls with the runner's
    # key. Either way the run is the runner's, and no state file of it exists.
    first.kill9()
    task = TaskFactory(title="Handed out into the void")
    run = run_queue(actor=Actor(user=UserFactory(username="po", is_staff=True)), task=task, provider="shell")
    headers = {"Authorization": f"Bearer {machine.key}"}
    with httpx.Client(base_url=f"{sy_server.url}/api/v1/", headers=headers, timeout=20) as api:
        api.post("runners/me/next/", json={"wait": 0}).raise_for_status()
    handed = wait_for(lambda: run_in(run, "assigned"), what="the run to be handed out", machines=[machine])
    assert (handed.runner.name, handed.attempt) == ("m-restart", 1)
    assert not machine.state(run)

    # Restarted with the same root: it finds nothing of the run, says so, and the run comes back to it.
    machine.start()
    wait_for(lambda: run_in(run, "succeeded", "failed"), timeout=60, what="the run to end", machines=[machine])

    assert (run.status, run.attempt, run.runner.name) == ("succeeded", 2, "m-restart"), run.error
    assert "had no record of it; handed back, queued again" in machine.output()
    # Handed back once: attempt 2, handed to the same runner, is not handed back while its poll's answer
    # is on its way (the runner counts an unknown run's age in time, not heartbeats: runner/loop.py).
    started = Event.objects.filter(name="run.started", subject_id=str(run.pk)).values_list("payload", flat=True)
    assert [p["attempt"] for p in started] == [2]
    assert Task.objects.get(pk=task.pk).status == "review"
