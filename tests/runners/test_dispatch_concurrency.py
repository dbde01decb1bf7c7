"""Runners racing for the queue (SPEC §8): each run is handed to exactly one runner, with real threads
on real database connections, released together. On PostgreSQL SELECT ... FOR UPDATE SKIP LOCKED
decides (each runner passes over the rows the other is taking); on SQLite the IMMEDIATE
transactions serialise the writers."""

import time
from collections import Counter

import pytest

from config.actors import Actor
from runners.dispatch import runs_dispatch
from runners.models import Run, Runner
from runners.services import run_queue, run_transition, runner_key_create
from tests.factories import TaskFactory, UserFactory
from tests.threads import run_together

pytestmark = [pytest.mark.concurrency, pytest.mark.django_db(transaction=True)]
RUNS = 50


def _runner(name: str, labels: list[str], capacity: int) -> tuple[Runner, Actor]:
    runner, issued, _ = runner_key_create(name=name, labels=labels, capacity=capacity)
    Runner.objects.filter(pk=runner.pk).update(providers=["demo"], status=Runner.Status.ONLINE)
    runner.refresh_from_db()
    return runner, Actor(agent=runner.agent, api_key=issued.api_key)


@pytest.mark.parametrize("round_", range(2))
def test_two_runners_racing_for_50_runs_take_each_exactly_once_and_respect_labels(round_):
    # given 50 queued runs, every fifth needing a gpu runner, and two runners, only one with a gpu
    person = Actor(user=UserFactory(is_staff=True))
    runs = [
        run_queue(actor=person, task=TaskFactory(labels=["runner:gpu"] if n % 5 == 0 else []), provider="demo")
        for n in range(RUNS)
    ]
    gpu_runs = {run.pk for n, run in enumerate(runs) if n % 5 == 0}
    racers = [_runner("gpu-box", ["linux", "gpu"], 3), _runner("cpu-box", ["linux"], 3)]
    taken: dict[str, list[int]] = {runner.name: [] for runner, _ in racers}
    most_held: Counter = Counter()

    # when each asks for work until there is none it may take, ending what it got to free its slots
    def work(racer):
        runner, actor = racer
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            got = runs_dispatch(actor=actor, runner=runner)
            held = Run.objects.filter(runner=runner, status__in=["assigned", "starting", "running"]).count()
            most_held[runner.name] = max(most_held[runner.name], held)
            for run in got:
                assert (run.status, run.runner_id) == ("assigned", runner.pk)
                taken[runner.name].append(run.pk)
                run_transition(actor=actor, run=run, to=Run.Status.FAILED, attempt=run.attempt)
            if not got:
                eligible = Run.objects.filter(status="queued")
                if "gpu" not in runner.labels:
                    eligible = eligible.exclude(pk__in=gpu_runs)
                if not eligible.exists():
                    return
        raise AssertionError(f"{runner.name} still found work after 60 s")

    errors = run_together(work, racers)

    # then nothing went wrong and every run went to exactly one runner
    assert errors == []
    handed = [run_id for ids in taken.values() for run_id in ids]
    assert Counter(handed) == Counter({run.pk: 1 for run in runs})
    # the gpu runs only to the gpu runner; the cpu runner took its share of the rest
    assert gpu_runs <= set(taken["gpu-box"])
    assert not gpu_runs & set(taken["cpu-box"])
    # the database agrees with what each runner was told, and no runner held more than its capacity
    assert dict(Run.objects.values_list("pk", "runner__name")) == {
        run_id: name for name, ids in taken.items() for run_id in ids
    }
    assert set(Run.objects.values_list("status", flat=True)) == {"failed"}
    assert max(most_held.values()) <= 3


@pytest.mark.parametrize("round_", range(3))
def test_one_runner_polling_twice_at_once_never_goes_over_its_capacity(round_):
    # given 10 queued runs and one runner of capacity 3 whose two polls race
    person = Actor(user=UserFactory(is_staff=True))
    for _ in range(10):
        run_queue(actor=person, task=TaskFactory(), provider="demo")
    runner, actor = _runner(f"solo-{round_}", ["linux"], 3)
    got: list[int] = []

    errors = run_together(lambda _: got.extend(r.pk for r in runs_dispatch(actor=actor, runner=runner)), [1, 2])

    assert errors == []
    assert len(got) == len(set(got)) == 3
    assert Run.objects.filter(runner=runner, status="assigned").count() == 3
