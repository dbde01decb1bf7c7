"""A runner's sign of life (SPEC §8): what it reports replaces what is stored, its runs' leases are
renewed, and it hears which runs it holds, which to cancel and which to drop."""

from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from runners.models import Run, Runner
from sessions_app.liveness import agent_alive
from sessions_app.models import Agent
from workspaces.worktrees.runner_hosted import Removal, worktree_removals_pending, worktree_reports_store

HELD = (Run.Status.ASSIGNED, Run.Status.STARTING, Run.Status.RUNNING)
STARTED = (Run.Status.STARTING, Run.Status.RUNNING)
# Not "labels": a runner's labels are those its key was made with (create_runner_key --label, or a
# person in the admin). What a heartbeat claims is ignored, so a runner cannot take a task that asks
# for a label it was not given (``runner:gpu``) by saying it has it; the answer shows what it has.
REPORTED_FIELDS = ("host", "providers", "capacity", "version", "instance", "room", "memory", "load")


@dataclass
class HeartbeatResult:
    runner: Runner
    held: list[Run] = field(default_factory=list)
    cancel: list[int] = field(default_factory=list)
    dropped: list[int] = field(default_factory=list)
    remove_worktrees: list[Removal] = field(default_factory=list)


def runner_seen(*, runner: Runner, report: dict | None = None) -> Runner:
    """Note the runner alive now: stored fields from ``report``, status online (or draining), and the
    lease of every run it holds renewed. Two UPDATEs and no transaction: each is whole on its own,
    and a lease renewed at the moment the expiry looks at it is either renewed or expired, not half."""
    report = report or {}
    now = timezone.now()
    changes = {name: report[name] for name in REPORTED_FIELDS if name in report}
    # A draining runner stays so until it says otherwise.
    draining = bool(report["draining"]) if "draining" in report else runner.status == Runner.Status.DRAINING
    changes["status"] = Runner.Status.DRAINING if draining else Runner.Status.ONLINE
    changes["last_seen_at"] = now
    Runner.objects.filter(pk=runner.pk).update(**changes, updated_at=now)
    for name, value in changes.items():
        setattr(runner, name, value)
    # Only started runs: an assigned one keeps the short lease it was handed out with
    # (RUNNER_ASSIGN_ACK_SECONDS), so a run given to a long poll whose runner died goes back soon.
    Run.objects.filter(runner=runner, status__in=STARTED).update(
        lease_expires_at=now + timedelta(seconds=settings.RUNNER_LEASE_SECONDS)
    )
    # The runner watches its agents' processes: while it holds their runs they are alive, even when
    # an agent is quiet (a shell command, a long think), so the reaper must not take their tasks back.
    # A waiting run's too: its runner keeps its worktree and session for the answer.
    working = Run.objects.filter(runner=runner, status__in=(*STARTED, Run.Status.WAITING), agent__isnull=False)
    for agent in Agent.objects.filter(pk__in=working.values("agent_id")).only("pk"):
        agent_alive(agent=agent, now=now, only_if_older=True)
    return runner


def runner_heartbeat(*, runner: Runner, report: dict) -> HeartbeatResult:
    """``report`` as validated by HeartbeatInput; ``runs`` lists what the runner believes it holds."""
    runner_seen(runner=runner, report=report)
    held = list(Run.objects.filter(runner=runner, status__in=HELD).select_related("session").order_by("id"))
    attempts = {run.pk: run.attempt for run in held}
    dropped = sorted({item["id"] for item in report.get("runs", []) if attempts.get(item["id"]) != item["attempt"]})
    if "worktrees" in report:
        removals = worktree_reports_store(runner=runner, reports=report["worktrees"])
    else:
        removals = worktree_removals_pending(runner=runner)
    return HeartbeatResult(
        runner=runner,
        held=held,
        cancel=[run.pk for run in held if run.cancel_requested_at is not None],
        dropped=dropped,
        remove_worktrees=removals,
    )


def runs_to_cancel(*, runner: Runner) -> list[int]:
    """Runs the runner holds whose cancel was asked for: it stops their agents."""
    return list(
        Run.objects.filter(runner=runner, status__in=HELD, cancel_requested_at__isnull=False)
        .order_by("id")
        .values_list("id", flat=True)
    )
