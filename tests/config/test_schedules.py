"""Periodic schedules live in code; setup_schedules writes them and respects a person's pause."""

from io import StringIO

import pytest
from django.core.management import call_command
from django_celery_beat.models import IntervalSchedule, PeriodicTask, PeriodicTasks

from config.schedules import schedules

pytestmark = pytest.mark.django_db


def _run() -> str:
    out = StringIO()
    call_command("setup_schedules", stdout=out)
    return out.getvalue()


def _rows() -> dict[str, tuple]:
    return {
        row.name: (row.task, row.interval.every, row.interval.period, row.enabled, row.expire_seconds)
        for row in PeriodicTask.objects.select_related("interval")
    }


def test_it_creates_every_schedule_of_the_code(settings):
    settings.SYNC_INTERVAL_SECONDS = 45
    settings.OBSERVER_RECONCILE_SECONDS = 600

    output = _run()

    assert _rows() == {
        "agents: reap stale heartbeats": ("sessions_app.tasks.agents_reap_stale_task", 60, "seconds", True, 60),
        "webhooks: retry due deliveries": ("ledger.tasks.webhooks_retry_due_task", 60, "seconds", True, 60),
        "sync: state snapshots to database": ("board.tasks.state_sync_task", 45, "seconds", True, 45),
        "observer: reconcile workspaces": ("workspaces.tasks.workspace_reconcile_task", 600, "seconds", True, 600),
        "runners: expire run leases": ("runners.tasks.runs_expire_leases_task", 15, "seconds", True, 15),
        "ship: pull requests and merged branches": ("runners.tasks.ship_watch_task", 300, "seconds", True, 300),
        "archival: archive due workspaces": (
            "workspaces.tasks.workspaces_archive_due_task",
            3600,
            "seconds",
            True,
            3600,
        ),
    }
    assert output.count("created") == 7


def test_a_second_run_changes_nothing():
    _run()
    rows, intervals = _rows(), IntervalSchedule.objects.count()
    changed_marker = PeriodicTasks.last_change()

    output = _run()

    assert _rows() == rows
    assert IntervalSchedule.objects.count() == intervals
    assert PeriodicTasks.last_change() == changed_marker  # a running beat has nothing to reload
    assert output.count("unchanged") == 7 and "created" not in output


def test_a_schedule_paused_in_the_admin_stays_paused_and_the_rest_is_put_back(settings):
    # given a person paused the sync and changed its task and interval by hand
    _run()
    row = PeriodicTask.objects.get(name="sync: state snapshots to database")
    row.enabled = False
    row.task = "board.tasks.something_else"
    row.interval = IntervalSchedule.objects.create(every=5, period=IntervalSchedule.MINUTES)
    row.save()
    settings.SYNC_INTERVAL_SECONDS = 120

    # when
    output = _run()

    # then the code's task and interval are back, and it is still paused
    assert _rows()["sync: state snapshots to database"] == ("board.tasks.state_sync_task", 120, "seconds", False, 120)
    assert "updated  sync: state snapshots to database (paused in the admin; left paused)" in output
    assert "task: board.tasks.something_else → board.tasks.state_sync_task" in output
    assert output.count("unchanged") == 6


def test_a_deleted_schedule_is_created_again():
    _run()
    PeriodicTask.objects.filter(name="agents: reap stale heartbeats").delete()

    output = _run()

    assert PeriodicTask.objects.filter(name="agents: reap stale heartbeats", enabled=True).exists()
    assert "  created  agents: reap stale heartbeats" in output


def test_names_in_code_are_unique():
    names = [s.name for s in schedules()]

    assert len(names) == len(set(names))
