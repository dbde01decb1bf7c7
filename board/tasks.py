"""Celery tasks of the board: thin adapters around its services."""

from celery import shared_task
from django.db import OperationalError

from board.sync import state_sync


@shared_task(
    name="board.tasks.state_sync_task",
    acks_late=True,
    autoretry_for=(OperationalError,),
    retry_backoff=5,
    retry_jitter=True,
    max_retries=5,
)
def state_sync_task(session_key: str | None = None) -> dict:
    """Sync one session folder, or all (``None``), into the database; returns the report.

    Safe to run twice or to redeliver after the worker died mid-run: every batch commits
    with the signatures of the files it applied, so a rerun picks up where it stopped.
    A locked or unreachable database (OperationalError) is retried with backoff.
    """
    return state_sync(session_key=session_key).as_dict()
