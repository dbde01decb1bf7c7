"""Celery adapters for work that spans several apps."""

from celery import shared_task

from composition.reaper import agents_reap_stale


# Registered under the name it had in sessions_app/tasks.py: beat's rows (config/schedules.py) and
# messages already queued name it so.
@shared_task(name="sessions_app.tasks.agents_reap_stale_task")
def agents_reap_stale_task() -> int:
    """Beat runs it every minute (config/schedules.py). Idempotent: an agent is reaped once."""
    return len(agents_reap_stale())
