"""A run queued in this process wakes the runners' long polls here at once (runners/queue_wake.py),
instead of at their next look at the queue."""

import threading
import time

import pytest
from django.db import connection

from config.actors import Actor
from runners import dispatch
from runners.models import Run
from runners.queue_wake import queue_generation, queue_wait, queue_wake
from runners.services import run_queue
from tests.factories import TaskFactory, UserFactory
from tests.runners.runner_clients import next_runs


def test_a_wake_after_the_generation_seen_ends_the_wait_and_none_lets_it_time_out():
    seen = queue_generation()
    queue_wake()  # came between the poll's look and its wait: not missed

    started = time.monotonic()
    assert queue_wait(seen, 5) is True
    assert queue_wait(queue_generation(), 0.05) is False
    assert time.monotonic() - started < 1


@pytest.mark.django_db
def test_queueing_wakes_only_once_committed(django_capture_on_commit_callbacks):
    seen = queue_generation()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run_queue(actor=Actor(user=UserFactory(is_staff=True)), task=TaskFactory(), provider="demo")
        assert queue_generation() == seen

    for callback in callbacks:
        callback()
    assert queue_generation() != seen


@pytest.mark.django_db(transaction=True)
def test_a_waiting_poll_answers_within_moments_even_with_a_slow_look(runner_client, monkeypatch):
    # given polls that look at the queue only every 30 s by themselves
    monkeypatch.setattr(dispatch, "POLL_SECONDS", 30)
    task = TaskFactory()
    person = Actor(user=UserFactory(is_staff=True))
    queued: list[Run] = []

    def press_run():
        try:
            time.sleep(0.5)
            queued.append(run_queue(actor=person, task=task, provider="demo"))
        finally:
            connection.close()

    presser = threading.Thread(target=press_run)
    presser.start()
    started = time.monotonic()

    response = next_runs(runner_client, wait=20)

    elapsed = time.monotonic() - started
    presser.join(timeout=10)
    assert [r["id"] for r in response.json()["runs"]] == [queued[0].pk]
    assert 0.4 < elapsed < 10  # woken by the queueing, well before the 20 s wait ends (10 s: a loaded machine)
