"""Lease expiry (SPEC §8): runs whose runner went quiet, and the runners themselves.

Beat calls ``runs_expire_leases`` every 15 s (runners/tasks.py, config/schedules.py). A run whose
lease lapsed (no heartbeat or poll of its runner for RUNNER_LEASE_SECONDS):
- assigned (never started): back to the queue, attempt + 1, for any runner, the card saying why (an
  answered waiting run back to waiting, for its own runner's next poll: runners/run_waiting.py);
- starting or running, once RUNNER_LEASE_MARGIN_SECONDS more have passed (the runner's watchdog has
  stopped the agent by the lease's end; the margin is for it to finish): lost (``run.lost``), its
  session failed (which gives the task back), its keys revoked, and with RUNNER_REQUEUE_LOST a new
  run queued that resumes it.
Either way the attempt the old runner holds is fenced out: its writes are refused (409 lease_lost).
Runners not seen for RUNNER_LEASE_SECONDS go offline.

Idempotent, and safe beside a heartbeat or a second expiry pass: each run is re-read under its row
lock (rows another pass holds are skipped) and expired only if its lease is still lapsed then.
"""

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from config.actors import SYSTEM
from runners.models import Run, Runner
from runners.run_lifecycle import run_end_effects
from runners.services import run_requeue_lost, run_transition, run_unacknowledged_note

S = Run.Status
STARTED = (S.STARTING, S.RUNNING)


@dataclass
class Expired:
    requeued: list[int] = field(default_factory=list)  # assigned runs back in the queue
    lost: list[int] = field(default_factory=list)  # started runs lost
    resumed_by: dict[int, int] = field(default_factory=dict)  # lost run -> the new run queued for it
    offline: list[str] = field(default_factory=list)  # runners gone offline


def runs_expire_leases(*, now: datetime | None = None) -> Expired:
    now = now or timezone.now()
    result = Expired()
    # Quiet runners first: a killed runner's long poll may still be open on the server, and dispatch
    # hands an offline runner nothing, so the runs re-queued below never go to it.
    cutoff = now - timedelta(seconds=settings.RUNNER_LEASE_SECONDS)
    quiet = Runner.objects.filter(status__in=[Runner.Status.ONLINE, Runner.Status.DRAINING], last_seen_at__lt=cutoff)
    result.offline = sorted(quiet.values_list("name", flat=True))
    # Re-checked by the UPDATE itself: a runner seen meanwhile stays online.
    quiet.filter(name__in=result.offline).update(status=Runner.Status.OFFLINE, updated_at=now)
    due = Run.objects.filter(_lapsed(now)).order_by("lease_expires_at", "id")
    for run_id in list(due.values_list("id", flat=True)):
        _expire_one(run_id=run_id, now=now, result=result)
    return result


def _lapsed(now: datetime) -> Q:
    """Assigned runs whose lease lapsed; started ones whose lease lapsed RUNNER_LEASE_MARGIN_SECONDS ago."""
    margin = timedelta(seconds=settings.RUNNER_LEASE_MARGIN_SECONDS)
    return Q(status=S.ASSIGNED, lease_expires_at__lt=now) | Q(status__in=STARTED, lease_expires_at__lt=now - margin)


@transaction.atomic
def _expire_one(*, run_id: int, now: datetime, result: Expired) -> None:
    run = (
        Run.objects.select_for_update(skip_locked=True, of=("self",))
        .select_related("runner", "agent", "session")
        .filter(_lapsed(now), pk=run_id)
        .first()
    )
    if run is None:
        return  # renewed, ended or being expired by another pass meanwhile
    if run.status == S.ASSIGNED and run.answered_at is not None and run.waiting_for:
        # An answered waiting run handed to its runner, which never acknowledged it: it waits again
        # (answered) for that runner's next poll; no other runner has its session.
        run_transition(actor=SYSTEM, run=run, to=S.WAITING)
        result.requeued.append(run.pk)
        return
    if run.status == S.ASSIGNED:
        why = f"not started within {settings.RUNNER_ASSIGN_ACK_SECONDS} s"
        run_transition(actor=SYSTEM, run=run, to=S.QUEUED, error=run_unacknowledged_note(run=run, why=why))
        result.requeued.append(run.pk)
        return
    lost = run_transition(actor=SYSTEM, run=run, to=S.LOST)
    run_end_effects(run=lost, actor=SYSTEM)
    result.lost.append(lost.pk)
    if settings.RUNNER_REQUEUE_LOST:
        result.resumed_by[lost.pk] = run_requeue_lost(actor=SYSTEM, lost=lost).pk
