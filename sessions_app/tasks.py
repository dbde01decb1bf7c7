"""Celery adapters for agents and sessions."""

from celery import shared_task

from sessions_app.reaper import agents_reap_stale


@shared_task
def agents_reap_stale_task() -> int:
    """Beat runs it every minute (config/schedules.py). Idempotent: an agent is reaped once."""
    return len(agents_reap_stale())
