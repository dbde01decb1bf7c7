"""Two runners, two machines: real `switchyard runner` processes with roots of their own, racing for
the queue of one live server; and a runner that dies for good, whose run is lost after the lease
TTL, queued again, taken by the other runner, and whose old attempt is fenced out.

The server runs with a short lease (RUNNER_LEASE_SECONDS=10, heartbeats every second), so a lease
lapses within the test; lease expiry is Celery beat's job in production, called here as the service.
"""

import os
import signal
import time
from collections import Counter

import httpx
import pytest

from board.models import Task
from config.actors import Actor
from ledger.models import Event
from runners.leases import runs_expire_leases
from runners.models import Run, Runner
from runners.services import run_queue
from sessions_app.logs import session_log_parts
from tests.client.live import server_roots  # noqa: F401
from tests.factories import TaskFactory, UserFactory
from tests.runners.live_runner import Machine, run_in, short_lease_server, wait_for

pytestmark = pytest.mark.usefixtures("transactional_db")

LEASE_SECONDS = 10  # short, yet longer than a heartbeat delayed by a loaded 2-core machine (5 s was not: CI)
RUNS = 50
GPU_RUNS = 15
QUICK = {"command": ["sh", "-c", "echo run $SWITCHYARD_RUN attempt $SWITCHYARD_ATTEMPT on $MACHINE; sleep 0.1"]}


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
def person():
    return Actor(user=UserFactory(username="po", is_staff=True))


@pytest.fixture
def machines(tmp_path, sy_server):
    made: list[Machine] = []

    def make(name: str, *, labels=(), command: dict | None = None) -> Machine:
        shell = {**(command or QUICK), "env": {"MACHINE": name}}
        made.append(
            Machine(tmp_path, sy_server.url, name, labels=["linux", *labels], capacity=4, providers={"shell": shell})
        )
        # Dispatch is what is raced here: plain processes, so the machine's load is the runs' alone under
        # the short lease (the sandbox has tests of its own: test_runner_sandbox*.py).
        made[-1].runner_table["sandbox"] = False
        made[-1].write()
        return made[-1]

    yield make
    for machine in made:
        machine.cleanup()


def ledger(run_id: int, name: str) -> list[dict]:
    rows = Event.objects.filter(name=name, subject_type="run", subject_id=str(run_id)).order_by("id")
    return list(rows.values_list("payload", flat=True))


def test_two_runners_race_for_fifty_runs_each_handed_out_once(person, machines):
    plain, gpu = machines("m-plain"), machines("m-gpu", labels=["gpu"])
    runs = []
    for i in range(RUNS):
        labels = ["runner:gpu"] if i % 3 == 0 and i < 3 * GPU_RUNS else []
        task = TaskFactory(title=f"Race {i}", labels=labels)
        runs.append(run_queue(actor=person, task=task, provider="shell"))
    gpu_ids = {r.pk for r in runs if Task.objects.get(pk=r.task_id).labels}
    assert len(gpu_ids) == GPU_RUNS
    plain.start()
    gpu.start()

    def all_ended():
        return Run.objects.filter(pk__in=[r.pk for r in runs], status__in=Run.TERMINAL).count() == RUNS

    wait_for(all_ended, timeout=300, what="all 50 runs to end", machines=[plain, gpu], interval=0.5)
    rows = {r.pk: r for r in Run.objects.filter(pk__in=[r.pk for r in runs]).select_related("runner")}
    statuses = Counter(r.status for r in rows.values())
    assert statuses == {"succeeded": RUNS}, (statuses, [r.error for r in rows.values() if r.error][:3])
    assert {r.attempt for r in rows.values()} == {1}
    # Each run handed out once: one start and one finish in the ledger, on attempt 1, never resumed.
    for run_id, row in rows.items():
        started, finished = ledger(run_id, "run.started"), ledger(run_id, "run.finished")
        assert [(p["attempt"], p["runner"]) for p in started] == [(1, row.runner.name)], (run_id, started)
        assert [p["attempt"] for p in finished] == [1], (run_id, finished)
        assert not ledger(run_id, "run.resumed") and not ledger(run_id, "run.lost")
        assert (
            f"run {run_id} attempt 1 on {row.runner.name}"
            in ((plain if row.runner.name == "m-plain" else gpu).root / row.log_path).read_text()
        )
    # Labels respected: gpu runs only on the gpu runner; and both runners got work.
    by_runner = Counter(r.runner.name for r in rows.values())
    assert {rows[i].runner.name for i in gpu_ids} == {"m-gpu"}
    assert by_runner["m-plain"] > 0 and by_runner["m-gpu"] > 0, by_runner
    assert Task.objects.filter(pk__in=[r.task_id for r in runs], status="review").count() == RUNS


def test_a_runner_gone_for_good_loses_its_run_to_the_other_and_is_fenced_out(
    person,
    machines,
    sy_server,
    server_roots,  # noqa: F811 - the live fixture
    settings,
):
    settings.RUNNER_LEASE_SECONDS = LEASE_SECONDS  # the server's, for the expiry called here
    slow = {"command": ["sh", "-c", "echo run $SWITCHYARD_RUN on $MACHINE; exec sleep 120"]}
    dead, alive = machines("m-dead", command=slow), machines("m-alive")
    task = TaskFactory(title="Outlive your runner", description="Anything.")
    run = run_queue(actor=person, task=task, provider="shell")
    doomed = dead.start()
    wait_for(lambda: run_in(run, "running"), timeout=60, what="the run to start", machines=[dead])
    wait_for(lambda: dead.state(run).get("shipped", 0) > 0, what="some log shipped", machines=[dead])
    pid = dead.state(run)["pid"]
    # The machine dies: the runner and its agent, and neither comes back.
    doomed.kill9()
    os.killpg(pid, signal.SIGKILL)
    died_at = time.monotonic()
    alive.start()

    def expired():
        runs_expire_leases()
        return run_in(run, "lost")

    wait_for(expired, timeout=LEASE_SECONDS + 30, what="the lease to lapse", machines=[alive], interval=0.5)
    assert time.monotonic() - died_at >= LEASE_SECONDS - 1.5  # not before the TTL (the last heartbeat renewed it)
    assert run.attempt == 1 and run.runner.name == "m-dead"
    assert [p["attempt"] for p in ledger(run.pk, "run.lost")] == [1]
    # Not seen for the lease's length either: offline (its last poll may have come after its last heartbeat).
    wait_for(
        lambda: runs_expire_leases() and Runner.objects.get(name="m-dead").status == "offline",
        timeout=10,
        what="the dead runner to go offline",
        interval=0.5,
    )

    # A new run that resumes the lost one, taken and finished by the other runner. Expiry keeps
    # running meanwhile, as beat does: the dead runner's last long poll may still be open on the
    # server (up to 25 s) and take the new run into a closed connection; its lease then lapses too,
    # and the run goes back to the queue for the living runner.
    again = Run.objects.get(resumes=run)

    def ended():
        runs_expire_leases()
        return run_in(again, "succeeded", "failed")

    wait_for(ended, timeout=60, what="the new run to end", machines=[alive], interval=0.5)
    assert again.status == "succeeded" and again.runner.name == "m-alive", again.error
    # Every attempt but the last one was handed to the dead runner's stale poll and taken back.
    assert [p["runner"] for p in ledger(again.pk, "run.started")] == ["m-alive"]
    assert [p["attempt"] for p in ledger(again.pk, "run.started")] == [again.attempt]
    assert not ledger(again.pk, "run.lost")
    assert again.task_id == run.task_id and again.provider == "shell"
    assert Task.objects.get(pk=task.pk).status == "review"
    assert [p["resumes"] for p in ledger(again.pk, "run.queued")] == [run.pk]

    # The dead runner's key, with its old attempt: every write is refused as lease_lost.
    log_file = server_roots["LOGS_ROOT"].joinpath(*session_log_parts(session=run.session))
    log_before = log_file.read_bytes()
    headers = {"Authorization": f"Bearer {dead.key}"}
    with httpx.Client(base_url=f"{sy_server.url}/api/v1/", headers=headers, timeout=20) as api:
        status = api.post(f"runs/{run.pk}/status/", json={"attempt": 1, "status": "running", "pid": 1})
        succeeded = api.post(f"runs/{run.pk}/status/", json={"attempt": 1, "status": "succeeded", "exit_code": 0})
        offset = dead.state(run)["shipped"]
        log = api.post(
            f"runs/{run.pk}/log/",
            params={"offset": offset, "attempt": 1},
            content=b"late line from the dead attempt\n",
            headers={"Content-Type": "application/octet-stream"},
        )
    for response in (status, succeeded, log):
        assert response.status_code == 409, response.text
        assert response.json().get("code") == "lease_lost", response.text
    lost = Run.objects.get(pk=run.pk)
    assert (lost.status, lost.attempt, lost.ended_at) == ("lost", 1, run.ended_at)
    assert len(ledger(run.pk, "run.finished")) == 0 and len(ledger(run.pk, "run.started")) == 1
    assert log_file.read_bytes() == log_before
