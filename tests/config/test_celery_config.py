"""Celery is set up for at-least-once work that never unpickles anything."""

import json
import os
import pickle
import subprocess
import sys

import pytest
from kombu.exceptions import ContentDisallowed
from kombu.serialization import dumps, loads, prepare_accept_content

from config.celery_app import app, ping_task
from config.schedules import schedules
from tests.worker import ROOT, WorkerProcess, wait_for

OUR_APPS = ("sessions_app.", "ledger.", "board.", "workspaces.")


def _our_tasks():
    app.loader.import_default_modules()
    return {name: task for name, task in app.tasks.items() if name.startswith(OUR_APPS)}


def test_only_json_is_accepted_sent_and_stored():
    assert app.conf.accept_content == ["json"]
    assert app.conf.task_serializer == "json"
    assert app.conf.result_serializer == "json"


def test_a_pickled_message_is_refused_by_the_accepted_content():
    accept = prepare_accept_content(app.conf.accept_content)
    pickled_type, pickled_encoding, pickled = dumps({"args": [1]}, serializer="pickle")
    json_type, json_encoding, as_json = dumps({"args": [1]}, serializer="json")

    with pytest.raises(ContentDisallowed):
        loads(pickled, pickled_type, pickled_encoding, accept=accept)
    assert loads(as_json, json_type, json_encoding, accept=accept) == {"args": [1]}


def test_a_task_is_acknowledged_after_it_runs_and_redelivered_if_its_worker_dies():
    assert app.conf.task_acks_late is True
    assert app.conf.task_reject_on_worker_lost is True
    assert app.conf.worker_prefetch_multiplier == 1
    assert app.conf.task_track_started is True
    assert app.conf.result_expires == 24 * 3600


def test_tasks_have_a_soft_limit_below_the_hard_one():
    assert 0 < app.conf.task_soft_time_limit < app.conf.task_time_limit
    for name, task in _our_tasks().items():
        soft = task.soft_time_limit or app.conf.task_soft_time_limit
        hard = task.time_limit or app.conf.task_time_limit
        assert soft < hard, name


def test_our_tasks_are_named_for_what_they_are():
    tasks = _our_tasks()

    assert {"sessions_app.tasks.agents_reap_stale_task", "ledger.tasks.webhook_deliver_task"} <= set(tasks)
    assert all(name.endswith("_task") for name in tasks), sorted(tasks)


def test_scheduled_tasks_of_this_part_are_registered():
    registered = set(_our_tasks())

    assert {
        "sessions_app.tasks.agents_reap_stale_task",
        "ledger.tasks.webhooks_retry_due_task",
    } <= registered & {s.task for s in schedules()}


def test_on_redis_the_visibility_timeout_outlasts_every_task():
    # Settings are read once per process: look at them in a fresh one with REDIS_URL set. Nothing
    # connects to Redis; db 13 is the one set aside for such checks.
    script = (
        "import json, django; django.setup();"
        "from config.celery_app import app; app.loader.import_default_modules();"
        "limits = [t.time_limit or app.conf.task_time_limit for n, t in app.tasks.items() if not n.startswith('celery.')];"
        "print(json.dumps({'broker': app.conf.broker_url, 'options': app.conf.broker_transport_options,"
        " 'longest': max(limits)}))"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test", "REDIS_URL": "redis://127.0.0.1:6379/13"}
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, check=True)

    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["broker"] == "redis://127.0.0.1:6379/13"
    assert seen["options"]["visibility_timeout"] > seen["longest"]


@pytest.mark.worker
def test_a_real_worker_refuses_a_pickled_message_and_goes_on(transactional_db, tmp_path):
    worker = WorkerProcess(tmp_path / "worker.log").start()
    try:
        # when a message arrives pickled (crafted by hand: our producers only speak JSON)
        with app.producer_or_acquire() as producer:
            producer.publish(
                pickle.dumps(([], {"token": "pickled"}, {})),
                serializer=None,
                content_type="application/x-python-serialize",
                content_encoding="binary",
                routing_key=app.conf.task_default_queue,
                headers={"task": "switchyard.ping", "id": "pickled-1", "lang": "py", "argsrepr": "", "kwargsrepr": ""},
            )
        # then it is refused, never run, and the worker still serves JSON tasks
        refusal = "Refusing to deserialize untrusted content of type pickle"
        wait_for(lambda: refusal in worker.output(), message="the refusal in the worker's log")
        assert ping_task.delay("json").get(timeout=30) == "pong json"
        assert "pong pickled" not in worker.output()
    finally:
        worker.stop()
