"""The margin after a started run's lease (runners/leases.py, RUNNER_LEASE_MARGIN_SECONDS): the runner's
watchdog stops the agent by the lease's end, so the server declares the run lost only once the margin
has passed too; a run handed out and never started has no agent and goes back to the queue at once."""

from datetime import timedelta

import pytest

from runners.leases import runs_expire_leases
from runners.models import Run
from tests.runners.runner_clients import next_runs, report, take_and_start

pytestmark = pytest.mark.django_db


def test_a_started_run_is_lost_only_after_its_lease_and_the_margin_an_assigned_one_at_once(
    runner_client, queue_run, settings
):
    settings.RUNNER_LEASE_SECONDS, settings.RUNNER_LEASE_MARGIN_SECONDS = 60, 5
    settings.RUNNER_REQUEUE_LOST = False  # the second run below is the only one handed out
    run = queue_run()
    take_and_start(runner_client, run)
    report(runner_client, run.pk, "running", pid=7)
    ends = Run.objects.get(pk=run.pk).lease_expires_at

    # Lapsed, but within the margin: its agent may still be stopping.
    assert runs_expire_leases(now=ends + timedelta(seconds=1)).lost == []
    assert runs_expire_leases(now=ends + timedelta(seconds=4.9)).lost == []
    assert Run.objects.get(pk=run.pk).status == "running"

    assert runs_expire_leases(now=ends + timedelta(seconds=5.1)).lost == [run.pk]
    assert Run.objects.get(pk=run.pk).status == "lost"

    # A run handed out and never started has no agent: back to the queue without the margin.
    other = queue_run()
    next_runs(runner_client)
    handed_until = Run.objects.get(pk=other.pk).lease_expires_at
    assert runs_expire_leases(now=handed_until + timedelta(seconds=1)).requeued == [other.pk]
    assert Run.objects.get(pk=other.pk).status == "queued"
