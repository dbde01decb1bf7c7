import signal

import pytest

from config.celery_app import ping_task
from tests.worker import WorkerProcess, wait_for

pytestmark = pytest.mark.worker


def test_a_real_worker_consumes_queued_tasks(celery_worker_process):
    result = ping_task.delay("hello")

    assert result.get(timeout=30) == "pong hello"


def test_a_killed_worker_can_be_replaced(celery_worker_process, tmp_path):
    celery_worker_process.kill(signal.SIGKILL)
    assert celery_worker_process.process.returncode == -signal.SIGKILL

    replacement = WorkerProcess(tmp_path / "worker2.log").start()
    try:
        assert ping_task.delay("again").get(timeout=30) == "pong again"
        wait_for(lambda: "succeeded" in replacement.output(), message="the task in the log")
    finally:
        replacement.stop()
