"""The periodic work beat runs, defined in code.

``python manage.py setup_schedules`` writes these into django-celery-beat's tables (by name),
where people may pause one or change it in the admin; a re-run puts the code's task and
interval back but keeps whatever a person chose for ``enabled``.

Tasks are named by string: beat only sends a name, and a task may live in an app that
another part of the code base adds (sync-to-db, the observer, archival).
"""

from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError, transaction
from django_celery_beat.models import IntervalSchedule, PeriodicTask


@dataclass(frozen=True)
class Schedule:
    name: str  # the PeriodicTask's unique name: how a re-run finds the row again
    task: str  # the registered Celery task name
    every_seconds: int
    description: str


def schedules() -> tuple[Schedule, ...]:
    """Read at call time, so the intervals follow the settings."""
    return (
        Schedule(
            name="agents: reap stale heartbeats",
            task="sessions_app.tasks.agents_reap_stale_task",
            every_seconds=60,
            description="Agents silent for HEARTBEAT_TTL_SECONDS go to error; their tasks and worktrees go back.",
        ),
        Schedule(
            name="webhooks: retry due deliveries",
            task="ledger.tasks.webhooks_retry_due_task",
            every_seconds=60,
            description="Sends deliveries whose retry time has come, and any a dead worker left behind.",
        ),
        Schedule(
            name="sync: state snapshots to database",
            task="board.tasks.state_sync_task",
            every_seconds=settings.SYNC_INTERVAL_SECONDS,
            description="A full sync-to-db pass over STATE_DIR (SYNC_INTERVAL_SECONDS).",
        ),
        Schedule(
            name="observer: reconcile workspaces",
            task="workspaces.tasks.workspace_reconcile_task",
            every_seconds=settings.OBSERVER_RECONCILE_SECONDS,
            description="Folders against the database, for files the watcher missed (OBSERVER_RECONCILE_SECONDS).",
        ),
        Schedule(
            name="runners: expire run leases",
            task="runners.tasks.runs_expire_leases_task",
            every_seconds=15,
            description="Runs whose runner went quiet for RUNNER_LEASE_SECONDS go back to the queue or are "
            "lost (and re-queued); such runners go offline.",
        ),
        Schedule(
            name="ship: pull requests and merged branches",
            task="runners.tasks.ship_watch_task",
            every_seconds=settings.SHIP_WATCH_SECONDS,
            description="Open pull requests' state from GitHub; tasks whose branch is in the default branch to "
            "Done (SHIP_WATCH_SECONDS).",
        ),
        Schedule(
            name="archival: archive due workspaces",
            task="workspaces.tasks.workspaces_archive_due_task",
            every_seconds=3600,
            description="Archives workspaces past their retention (ARCHIVE_AFTER_DAYS).",
        ),
    )


@dataclass(frozen=True)
class ScheduleWritten:
    name: str
    action: str  # "created", "updated" or "unchanged"
    enabled: bool  # as it is now: a person may have paused it in the admin
    changes: tuple[str, ...] = ()


def schedules_install() -> list[ScheduleWritten]:
    """Create or update one PeriodicTask per schedule, by name. ``enabled`` is set on creation only."""
    return [schedule_install(schedule=schedule) for schedule in schedules()]


def schedule_install(*, schedule: Schedule) -> ScheduleWritten:
    with transaction.atomic():
        wanted = {
            "task": schedule.task,
            "interval": _interval(schedule.every_seconds),
            "crontab": None,
            "solar": None,
            "clocked": None,
            "one_off": False,
            "description": schedule.description,
            # A run beat sent that no worker took before the next one is due is dropped, so a
            # stopped worker does not come back to a pile of identical messages.
            "expire_seconds": schedule.every_seconds,
            "expires": None,
        }
        row = PeriodicTask.objects.select_for_update().filter(name=schedule.name).first()
        if row is None:
            try:
                with transaction.atomic():
                    row = PeriodicTask.objects.create(name=schedule.name, enabled=True, **wanted)
                return ScheduleWritten(name=schedule.name, action="created", enabled=True)
            except IntegrityError:  # another setup_schedules created it just now
                row = PeriodicTask.objects.select_for_update().get(name=schedule.name)
        changes = tuple(
            _describe(field, getattr(row, field), value)
            for field, value in wanted.items()
            if getattr(row, field) != value
        )
        if changes:
            for field, value in wanted.items():
                setattr(row, field, value)
            row.save()  # save(), not update(): it bumps the change marker a running beat reloads on
        return ScheduleWritten(
            name=schedule.name, action="updated" if changes else "unchanged", enabled=row.enabled, changes=changes
        )


def _interval(seconds: int) -> IntervalSchedule:
    period = IntervalSchedule.SECONDS
    existing = IntervalSchedule.objects.filter(every=seconds, period=period).order_by("pk").first()
    return existing or IntervalSchedule.objects.create(every=seconds, period=period)


def _describe(field: str, old, new) -> str:
    return f"{field}: {old} → {new}"
