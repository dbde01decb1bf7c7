"""Handing queued runs to runners (SPEC §8): the long poll of ``POST /runners/me/next/``.

A runner gets at most its free capacity (capacity minus the runs it holds), oldest run first, of
the runs whose provider it offers and whose task's runner requirements (labels ``runner:<label>``)
its labels meet, and, when the runner says how much room its machine's memory has (``room``:
provider -> runs, runners/room.py), no more than that. No run is ever handed to two runners: each
is taken under its row lock (on PostgreSQL ``SELECT ... FOR UPDATE SKIP LOCKED``, so runners
racing for the queue pass over each other's rows instead of queueing on them; on SQLite the
IMMEDIATE transaction serialises the writers) and moved queued -> assigned only if it is still
queued. The runner's own row is locked first, so two polls of one runner cannot both fill the same free slot,
and a poll of a runner process since restarted (its ``instance`` no longer the runner's) takes nothing: a
killed runner's poll stays open on the server until it answers, and its answer would go nowhere.

First come its waiting runs that a person has answered (runners/run_waiting.py): they go back to the
runner holding their worktree and agent session, and to no other, waiting -> assigned.
"""

import time
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from config.actors import Actor
from config.api.errors import DomainError
from config.process_stop import process_stopping
from runners.heartbeat import HELD, runner_seen, runs_to_cancel
from runners.identities import run_agent_get_or_create
from runners.models import Run, Runner
from runners.queue_wake import queue_generation, queue_wait
from runners.room import RoomBudget
from runners.services import run_transition

POLL_SECONDS = 0.1  # how often a waiting poll looks at the queue again
CANDIDATES = 200  # queued runs looked at per pass, oldest first
REQUIREMENT_PREFIX = "runner:"


@dataclass
class NextResult:
    runs: list[Run]
    cancel: list[int]


def task_runner_requirements(labels) -> set[str]:
    """The runner labels a task needs: ``runner:gpu`` needs a runner labelled ``gpu``."""
    return {
        label[len(REQUIREMENT_PREFIX) :]
        for label in labels or []
        if isinstance(label, str) and label.startswith(REQUIREMENT_PREFIX)
    }


def _matching_queued(runner: Runner, budget: RoomBudget):
    """Queued runs of a provider it offers and has room for, whose task's repository (if any) is on
    the server's machine or on this runner's: a runner-hosted clone is worked only where it is. A run
    continuing another's agent session goes to the runner that ran it (the session is on its disk)
    while that runner is online; to any runner otherwise, which starts a fresh session told where the
    work stood."""
    return Run.objects.filter(
        Q(task__repository__runner__isnull=True) | Q(task__repository__runner=runner),
        ~Q(kind=Run.Kind.CONTINUE)
        | Q(resumes__runner=runner)
        | Q(resumes__runner__isnull=True)
        | Q(resumes__runner__status__in=[Runner.Status.OFFLINE, Runner.Status.DRAINING]),
        status=Run.Status.QUEUED,
        provider__in=[p for p in runner.providers if p and budget.has_room(p)],
    )


def _answered_waiting(runner: Runner, budget: RoomBudget):
    """Its waiting runs a person answered, of providers it has room for: they resume here."""
    return Run.objects.filter(
        runner=runner,
        status=Run.Status.WAITING,
        answered_at__isnull=False,
        provider__in=[p for p in runner.providers if p and budget.has_room(p)],
    )


def runs_dispatch(*, actor: Actor, runner: Runner, room: dict[str, int] | None = None, instance: str = "") -> list[Run]:
    """Assign up to the runner's free capacity of its answered waiting runs, then of matching queued
    runs, to it, within ``room`` when given (None: capacity alone); returns them. Nothing when
    ``instance`` (the asking runner process) is no longer the runner's latest: that process was
    restarted, and what this poll hands out would go nowhere."""
    if runner.status == Runner.Status.DRAINING or not runner.providers:
        return []
    budget = RoomBudget(room)
    # A look without a transaction first: most polls find nothing, and on SQLite every
    # transaction takes the write lock.
    if not _matching_queued(runner, budget).exists() and not _answered_waiting(runner, budget).exists():
        return []
    taken: list[Run] = []
    with transaction.atomic():
        runner = Runner.objects.select_for_update().get(pk=runner.pk)
        if runner.status != Runner.Status.ONLINE or (instance and runner.instance not in ("", instance)):
            return []  # draining; declared gone (runners/leases.py); or a process since restarted
        free = runner.capacity - Run.objects.filter(runner=runner, status__in=HELD).count()
        if free <= 0:
            return []
        labels = set(runner.labels or [])
        candidates = (
            _matching_queued(runner, budget).order_by("created_at", "id").values_list("id", "provider", "task__labels")
        )
        # Short: an answer that never reached a runner (killed mid-poll) must not hold the run for long.
        lease = timezone.now() + timedelta(
            seconds=min(settings.RUNNER_ASSIGN_ACK_SECONDS, settings.RUNNER_LEASE_SECONDS)
        )
        agents = {}
        answered = _answered_waiting(runner, budget).order_by("answered_at", "id").values_list("id", "provider")
        for run_id, provider in answered[:free]:
            if not budget.fits(provider):
                continue
            run = (
                Run.objects.select_for_update(skip_locked=True, of=("self",))
                .filter(pk=run_id, status=Run.Status.WAITING)
                .first()
            )
            if run is None:
                continue
            budget.take(run.provider)
            # Its own agent still (it holds the task): attempt + 1 (services._run_move), a short lease.
            taken.append(
                run_transition(actor=actor, run=run, to=Run.Status.ASSIGNED, runner=runner, lease_expires_at=lease)
            )
        if len(taken) >= free:
            return taken
        for run_id, provider, task_labels in candidates[:CANDIDATES]:
            if not task_runner_requirements(task_labels) <= labels or not budget.fits(provider):
                continue
            # Still queued, and nobody else is taking it right now (their lock is skipped, not waited on).
            run = (
                Run.objects.select_for_update(skip_locked=True, of=("self",))
                .filter(pk=run_id, status=Run.Status.QUEUED)
                .first()
            )
            if run is None:
                continue
            budget.take(run.provider)
            if run.provider not in agents:
                agents[run.provider] = run_agent_get_or_create(provider=run.provider, runner=runner)
            taken.append(
                run_transition(
                    actor=actor,
                    run=run,
                    to=Run.Status.ASSIGNED,
                    runner=runner,
                    agent=agents[run.provider],
                    lease_expires_at=lease,
                )
            )
            if len(taken) >= free:
                break
    return taken


def runner_next(*, actor: Actor, runner: Runner, wait: float, report: dict | None = None) -> NextResult:
    """The long poll: answer at once with runs handed out or cancels pending, else look again every
    POLL_SECONDS, or at once when a run is queued in this process (runners/queue_wake.py), until
    ``wait`` (capped by RUNNER_POLL_MAX_SECONDS) has passed or the process is stopping
    (config/process_stop.py), then answer empty.
    ``report``: what the runner said with its ask, stored as a heartbeat's; its ``room``
    (runners/room.py; absent or None: no limit) bounds every look of this poll.
    Runs outside any transaction, so each look sees what committed meanwhile."""
    deadline = time.monotonic() + max(0.0, min(wait, settings.RUNNER_POLL_MAX_SECONDS))
    report = report or {}
    room = report.get("room")
    instance = report.get("instance", "")
    runner_seen(runner=runner, report=report)  # a poll is a heartbeat too
    while True:
        seen = queue_generation()  # read before the look: a run queued after it wakes the wait below
        runs = runs_dispatch(actor=actor, runner=runner, room=room, instance=instance)
        cancel = runs_to_cancel(runner=runner)
        left = deadline - time.monotonic()
        if runs or cancel or left <= 0 or process_stopping():
            return NextResult(runs=runs, cancel=cancel)
        queue_wait(seen, min(POLL_SECONDS, left))
        # What a heartbeat meanwhile changed (providers, labels, draining) applies to the next look.
        try:
            runner.refresh_from_db(fields=["status", "providers", "labels", "capacity"])
        except Runner.DoesNotExist:
            # Deleted meanwhile (in the admin): its key went with it, so this poll ends as its next would.
            raise DomainError(f"Runner {runner.name} was deleted while it waited for work.", code="not_found") from None
        if runner.status == Runner.Status.OFFLINE:
            # Declared gone while this poll waited (runners/leases.py): a killed runner's poll, left open on
            # the server; it ends now rather than looking again for the rest of its wait.
            return NextResult(runs=[], cancel=[])
