"""Celery adapters for runners."""

from celery import shared_task

from runners.leases import runs_expire_leases


@shared_task
def runs_expire_leases_task() -> dict:
    """Beat runs it every 15 s (config/schedules.py). Idempotent: a lapsed lease is expired once."""
    expired = runs_expire_leases()
    return {"requeued": len(expired.requeued), "lost": len(expired.lost), "offline": len(expired.offline)}
