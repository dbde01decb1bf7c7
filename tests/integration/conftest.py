import pytest

from tests.worker import WorkerProcess


@pytest.fixture
def celery_worker_process(transactional_db, tmp_path):
    """A real worker process consuming from the test's broker and database."""
    worker = WorkerProcess(tmp_path / "worker.log").start()
    yield worker
    worker.stop()
