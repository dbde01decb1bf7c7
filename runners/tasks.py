"""Celery adapters for runners."""

from celery import shared_task

from runners.leases import runs_expire_leases
from runners.ship_watch import pull_requests_refresh, tasks_done_when_merged


@shared_task
def runs_expire_leases_task() -> dict:
    """Beat runs it every 15 s (config/schedules.py). Idempotent: a lapsed lease is expired once."""
    expired = runs_expire_leases()
    return {"requeued": len(expired.requeued), "lost": len(expired.lost), "offline": len(expired.offline)}


@shared_task
def ship_watch_task() -> dict:
    """Beat runs it every SHIP_WATCH_SECONDS (config/schedules.py): open pull requests' state from
    GitHub, then tasks whose branch is in the default branch to Done. Idempotent."""
    asked = pull_requests_refresh()
    return {"pull_requests": asked, "done": tasks_done_when_merged()}
