"""Writes for runs (SPEC §8): queue, move through the state machine, cancel.

Every status change takes the run's row with ``select_for_update`` inside the transaction (on
SQLite the IMMEDIATE transaction serialises writers instead), checks the move and the attempt
against the row as locked, and only then writes: there is no check-then-act. The database backs
the one rule that spans rows: at most one active run per task (``run_one_active_per_task``).
"""

from django.db import IntegrityError, transaction
from django.utils import timezone

from board.live import board_push_tasks
from board.models import Task
from board.moves import task_move
from board.services import require_orchestrator
from config.actors import Actor
from config.api.errors import LEASE_LOST, DomainError
from config.pages import BOARD, user_may
from ledger.events import event_record
from runners.models import Run, Runner
from runners.queue_wake import queue_wake
from sessions_app.keys import IssuedKey, agent_get_or_create, api_key_create
from sessions_app.models import Agent, AgentApiKey

S = Run.Status

# The state machine: from each status, the statuses a run may move to. Terminal ones lead nowhere.
RUN_TRANSITIONS: dict[str, frozenset[str]] = {
    S.QUEUED: frozenset({S.ASSIGNED, S.CANCELLED}),
    # Back to queued when the runner let its lease lapse before starting anything: the attempt is bumped.
    # Back to waiting: an answered waiting run handed to its runner, which never acknowledged it.
    S.ASSIGNED: frozenset({S.QUEUED, S.STARTING, S.FAILED, S.CANCELLED, S.LOST, S.WAITING}),
    # starting/running -> starting: the holder restarted after a crash and its agent was dead, so it
    # starts the agent again (resuming the session): a new attempt, fencing out what the dead one sent.
    S.STARTING: frozenset({S.STARTING, S.RUNNING, S.FAILED, S.CANCELLED, S.LOST}),
    # running -> waiting: its agent deferred a tool call to a person and exited (runners/run_waiting.py).
    S.RUNNING: frozenset({S.STARTING, S.SUCCEEDED, S.FAILED, S.CANCELLED, S.LOST, S.WAITING}),
    # Answered: handed to the runner holding its worktree (assigned), which resumes the session. Or a
    # person re-queues it for any runner (a fresh worktree and session), or cancels it.
    S.WAITING: frozenset({S.ASSIGNED, S.QUEUED, S.CANCELLED}),
    S.SUCCEEDED: frozenset(),
    S.FAILED: frozenset(),
    S.CANCELLED: frozenset(),
    S.LOST: frozenset(),
}

# What a move may set besides the status (the runner reports these); ``runner`` only when assigning.
TRANSITION_FIELDS = frozenset(
    {
        "runner",
        "agent",
        "session",
        "pid",
        "sandboxed",
        "exit_code",
        "workdir",
        "log_path",
        "lease_expires_at",
        "error",
        "summary",
        "agent_session",
        "waiting_for",
        "answer",
        "answered_at",
    }
)

# The ledger event each move records, if any (assigned, starting and re-queued are the runner's business).
_EVENTS = {
    S.RUNNING: "run.started",
    S.SUCCEEDED: "run.finished",
    S.FAILED: "run.finished",
    S.CANCELLED: "run.cancelled",
    S.LOST: "run.lost",
    S.WAITING: "run.waiting",
}

PROVIDER_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")


RUNNER_NAME_MAX = 48


def runner_agent_slug(*, name: str) -> str:
    return f"runner-{name}"


@transaction.atomic
def runner_key_create(
    *, name: str, labels: list[str] | None = None, capacity: int | None = None
) -> tuple[Runner, IssuedKey, bool]:
    """A new key of scope ``run`` for the runner ``name``, creating the runner (and its agent,
    ``runner-<name>``) if it does not exist. ``labels``/``capacity``, when given, replace the
    runner's. Returns (runner, the key shown once, whether the runner was created)."""
    if not name or len(name) > RUNNER_NAME_MAX or not all(c.isalnum() or c in "-_" for c in name):
        raise DomainError(f"A runner's name must be 1-{RUNNER_NAME_MAX} letters, digits, '-' or '_'.")
    if labels is not None and not all(isinstance(label, str) and label.strip() for label in labels):
        raise DomainError("Labels must be non-empty strings.")
    if capacity is not None and capacity < 1:
        raise DomainError("A runner's capacity must be at least 1.")
    runner = Runner.objects.select_for_update().filter(name=name).first()
    created = runner is None
    if created:
        agent = agent_get_or_create(slug=runner_agent_slug(name=name), provider=Agent.Provider.CUSTOM)
        try:
            # A savepoint: two calls creating one name at once meet the unique name, not each other's row.
            with transaction.atomic():
                runner = Runner.objects.create(name=name, agent=agent, labels=labels or [], capacity=capacity or 1)
        except IntegrityError:
            raise DomainError(
                f"Runner {name!r} (or its agent {agent.slug!r}) was just created elsewhere; try again.",
                code="conflict",
            ) from None
    elif labels is not None or capacity is not None:
        runner.labels = runner.labels if labels is None else labels
        runner.capacity = runner.capacity if capacity is None else capacity
        runner.save(update_fields=["labels", "capacity", "updated_at"])
    issued = api_key_create(agent=runner.agent, name=f"runner {name}", scopes=[AgentApiKey.Scope.RUN])
    return runner, issued, created


def _run_event(name: str, run: Run, actor: Actor, **payload) -> None:
    event_record(
        name=name,
        subject_type="run",
        subject_id=run.pk,
        actor=actor.label,
        payload={
            "task": run.task_id,
            "status": run.status,
            "provider": run.provider,
            "attempt": run.attempt,
            "runner": run.runner.name if run.runner_id else None,
            **payload,
        },
    )


def run_prompt_default(*, task: Task) -> str:
    return f"{task.title}\n\n{task.description}".strip()


def require_run_starter(*, actor: Actor, what: str) -> None:
    """Who may start and stop runs: staff, an orchestrating agent key, or a person who works the
    board (a product owner presses Run on a card). The API asks for staff or orchestrate before
    reading a body; the board's pages rely on this check."""
    if actor.agent is None and actor.user is not None and user_may(actor.user, BOARD):
        return
    require_orchestrator(actor=actor, what=what)


@transaction.atomic
def run_queue(
    *,
    actor: Actor,
    task: Task,
    provider: str,
    prompt: str | None = None,
    kind: str = Run.Kind.WORK,
    resumes: Run | None = None,
) -> Run:
    """Queue a run of ``provider`` on ``task`` (a fresh agent session; ``kind`` review: one that reads
    the change and comments); 409 if the task already has an active run. ``resumes``: the earlier run
    whose session's checkpoint and milestones the new one is told of (another provider taking over)."""
    require_run_starter(actor=actor, what="Queueing runs")
    if not provider or len(provider) > 64 or not set(provider) <= PROVIDER_CHARS:
        raise DomainError(
            "provider must be 1-64 letters, digits, '-', '_' or '.'.", extra={"errors": {"provider": ["Invalid."]}}
        )
    task = Task.objects.select_for_update().get(pk=task.pk)
    _refuse_held_elsewhere(task)
    prompt = run_prompt_default(task=task) if prompt is None else prompt
    run = _run_create(task=task, provider=provider, prompt=prompt, kind=kind, resumes=resumes)
    _run_event("run.queued", run, actor, **({"kind": kind} if kind != Run.Kind.WORK else {}))
    board_push_tasks(task_ids=[run.task_id])  # the card shows its run: queued, then its state
    transaction.on_commit(queue_wake)  # a runner's long poll in this process looks at once
    if task.status not in (Task.Status.READY, Task.Status.IN_PROGRESS):
        # Pressing Run on a card in any other column means "do this now": the run starts only on a
        # ready task (run_lifecycle), so the card goes to Ready, where its runner claims it.
        task_move(actor=actor, task_id=task.pk, status=Task.Status.READY)
    return run


def _refuse_held_elsewhere(task: Task) -> None:
    if task.status == Task.Status.IN_PROGRESS and not Run.objects.filter(task=task, agent=task.assignee_id).exists():
        raise DomainError(
            f"Task {task.pk} is in progress with another agent; release it or wait for it to finish.",
            code="conflict",
            extra={"task": task.pk, "task_status": task.status},
        )


def _run_create(
    *, task: Task, provider: str, prompt: str, resumes: Run | None = None, kind: str = Run.Kind.WORK
) -> Run:
    """The run's row; a second active run of the task is a 409 (``run_one_active_per_task``)."""
    try:
        # A savepoint, so a second active run is a 409 and not a broken outer transaction.
        with transaction.atomic():
            return Run.objects.create(task=task, provider=provider, prompt=prompt, resumes=resumes, kind=kind)
    except IntegrityError:
        active = Run.objects.filter(task=task, status__in=Run.ACTIVE).values_list("pk", flat=True).first()
        raise DomainError(
            f"Task {task.pk} already has an active run{f' ({active})' if active else ''}; cancel it first.",
            code="conflict",
            extra={"run": active},
        ) from None


@transaction.atomic
def run_queue_follow_up(*, actor: Actor, previous: Run, prompt: str) -> Run:
    """Queue a run that continues ``previous``'s agent session on the same task (and so the same
    branch) with a new prompt (kind ``continue``): the runner that ran ``previous`` gets it while it
    is online (runners/dispatch.py) and starts its provider's resume of ``previous.agent_session``;
    another runner, or a provider without a resume, starts a fresh session told where the work stood."""
    require_run_starter(actor=actor, what="Queueing runs")
    task = Task.objects.select_for_update().get(pk=previous.task_id)
    _refuse_held_elsewhere(task)
    run = _run_create(task=task, provider=previous.provider, prompt=prompt, resumes=previous, kind=Run.Kind.CONTINUE)
    _run_event("run.queued", run, actor, resumes=previous.pk, kind=run.kind)
    board_push_tasks(task_ids=[run.task_id])
    transaction.on_commit(queue_wake)
    if task.status not in (Task.Status.READY, Task.Status.IN_PROGRESS):
        task_move(actor=actor, task_id=task.pk, status=Task.Status.READY)  # as run_queue: it starts from Ready
    return run


def run_requeue_lost(*, actor: Actor, lost: Run) -> Run:
    """Queue a new run of a lost run's task that resumes it (same provider and prompt). Caller holds
    the transaction in which ``lost`` ended: the task has no other active run then."""
    # Of the same kind: a lost review still reviews, a lost continuation continues (the lost run's session).
    run = Run.objects.create(
        task_id=lost.task_id, provider=lost.provider, prompt=lost.prompt, resumes=lost, kind=lost.kind
    )
    _run_event("run.queued", run, actor, resumes=lost.pk)
    board_push_tasks(task_ids=[run.task_id])
    transaction.on_commit(queue_wake)
    return run


NOTE_MAX = 300


def run_unacknowledged_note(*, run: Run, why: str) -> str:
    """What the card shows of a run handed to a runner that never acknowledged it, once it is queued
    again (stored as its ``error`` until it starts)."""
    runner = run.runner.name if run.runner_id else "a runner"
    return f"Handed to runner {runner} (attempt {run.attempt}), not acknowledged: {why}; queued again."[:NOTE_MAX]


def run_may_drive(actor: Actor, runner: Runner | None) -> bool:
    """Switchyard itself, staff, or the runner holding the run (by a key of scope 'run')."""
    if actor.system or actor.is_staff:
        return True
    if actor.agent is None or runner is None or runner.agent_id != actor.agent.pk:
        return False
    return actor.api_key is None or actor.api_key.has_scope(AgentApiKey.Scope.RUN)


def run_refuse_stale(run: Run, attempt: int | None) -> None:
    if attempt is not None and attempt != run.attempt:
        raise DomainError(
            f"Run {run.pk} is at attempt {run.attempt}; attempt {attempt} lost its lease and may not change it.",
            code="conflict",
            extra={"code": LEASE_LOST, "run": run.pk, "attempt": run.attempt},
        )


@transaction.atomic
def run_transition(*, actor: Actor, run: Run, to: str, attempt: int | None = None, **fields) -> Run:
    """Move ``run`` to ``to`` if the state machine allows it; returns the row as written.

    ``attempt``: the attempt the caller holds; a stale one is refused with 409 ``lease_lost``.
    ``fields``: what the runner reports with the move (see TRANSITION_FIELDS). Locks the run's
    row itself (select_for_update); the caller needs no lock.
    """
    unknown = set(fields) - TRANSITION_FIELDS
    if unknown:
        raise DomainError(f"Unknown fields for a run: {', '.join(sorted(unknown))}.")
    if to not in RUN_TRANSITIONS:
        raise DomainError(f"Unknown run status {to!r}.")
    if "runner" in fields and to != S.ASSIGNED:
        raise DomainError("A run's runner is set only when it is assigned.")
    locked = Run.objects.select_for_update(of=("self",)).select_related("runner").get(pk=run.pk)
    runner = fields.get("runner") if to == S.ASSIGNED else locked.runner
    if to == S.ASSIGNED and runner is None:
        raise DomainError("Assigning a run needs a runner.")
    # The fence first: a runner whose run was handed back or to another runner no longer holds it,
    # and must hear lease_lost (drop it), not forbidden.
    run_refuse_stale(locked, attempt)
    if not run_may_drive(actor, runner):
        raise DomainError(f"Run {locked.pk} is not held by this runner.", code="forbidden")
    if to not in RUN_TRANSITIONS[locked.status]:
        raise DomainError(
            f"Run {locked.pk} cannot go from {locked.status} to {to}.",
            code="conflict",
            extra={"status": locked.status},
        )
    return _run_move(actor=actor, run=locked, to=to, fields=fields)


def _run_move(*, actor: Actor, run: Run, to: str, fields: dict) -> Run:
    """Write a move already checked, on a row the caller holds run, and record its event."""
    now = timezone.now()
    changed = {"status", "updated_at", *fields}
    restarted = to == S.STARTING and run.status in (S.STARTING, S.RUNNING)
    answered = to == S.ASSIGNED and run.status == S.WAITING
    for name, value in fields.items():
        setattr(run, name, value)
    run.status = to
    if to == S.QUEUED:
        # Handed back: a new attempt, so the runner that had it is fenced out; the next runner
        # works it with an agent of its own.
        run.attempt += 1
        run.runner = None
        run.agent = None
        run.lease_expires_at = None
        changed |= {"attempt", "runner", "agent", "lease_expires_at"}
    elif restarted or answered:
        # The same runner starts the agent again (after a crash, or to resume a waiting run with its
        # answer): a new attempt, so what the earlier one sent is refused.
        run.attempt += 1
        changed.add("attempt")
    elif to == S.WAITING:
        # No process: nothing to renew, nothing for the lease expiry to find.
        run.lease_expires_at = None
        run.pid = None
        changed |= {"lease_expires_at", "pid"}
    elif to == S.RUNNING and run.started_at is None:
        run.started_at = now
        changed.add("started_at")
    elif to in Run.TERMINAL:
        run.ended_at = now
        run.lease_expires_at = None
        changed |= {"ended_at", "lease_expires_at"}
    # Only the columns this move owns, so a row read earlier never overwrites another field.
    run.save(update_fields=sorted(changed))
    # The task's card shows its run ("queued", "running on build-1"): redrawn after commit.
    board_push_tasks(task_ids=[run.task_id])
    if restarted:
        _run_event("run.resumed", run, actor)
    elif to in _EVENTS:
        extra = {"exit_code": run.exit_code} if to in (S.SUCCEEDED, S.FAILED) else {}
        if to == S.WAITING:
            extra["waiting_for"] = run.waiting_for
        if to == S.SUCCEEDED and run.summary:
            extra["summary"] = run.summary  # what the run produced, for the ledger and webhooks
        _run_event(_EVENTS[to], run, actor, **extra)
    return run


@transaction.atomic
def run_cancel(*, actor: Actor, run: Run) -> Run:
    """Stop a run: a queued one is cancelled at once; a handed-out one gets ``cancel_requested_at``
    (its runner learns it and ends the run ``cancelled``). Asking twice changes nothing."""
    if not actor.system:  # Switchyard itself cancels too (a card dragged out of In progress)
        require_run_starter(actor=actor, what="Cancelling runs")
    locked = Run.objects.select_for_update(of=("self",)).select_related("runner").get(pk=run.pk)
    if locked.status in (S.QUEUED, S.WAITING):
        # No agent to stop: cancelled at once. A waiting run's task and session are its caller's to
        # end (runners/run_waiting.py: run_stop).
        return _run_move(actor=actor, run=locked, to=S.CANCELLED, fields={})
    if locked.status in Run.TERMINAL:
        raise DomainError(
            f"Run {locked.pk} has already ended ({locked.status}).", code="conflict", extra={"status": locked.status}
        )
    if locked.cancel_requested_at is None:
        locked.cancel_requested_at = timezone.now()
        locked.save(update_fields=["cancel_requested_at", "updated_at"])
        # Recorded, so webhooks and the live card see "stopping" before the runner reports the end.
        _run_event("run.cancel_requested", locked, actor)
        board_push_tasks(task_ids=[locked.task_id])
    return locked


@transaction.atomic
def run_waiting_requeue(*, actor: Actor, run: Run) -> Run:
    """A person hands a waiting run to any runner (the one holding its worktree is gone): queued
    again, attempt + 1, without its session, agent session or question, so it starts afresh
    (runners/run_waiting.py ends what it held first). 409 unless it waits."""
    require_run_starter(actor=actor, what="Re-queueing runs")
    locked = Run.objects.select_for_update(of=("self",)).select_related("runner").get(pk=run.pk)
    if locked.status != S.WAITING:
        raise DomainError(
            f"Run {locked.pk} is {locked.status}, not waiting: only a waiting run is re-queued.",
            code="conflict",
            extra={"status": locked.status},
        )
    held_by = locked.runner.name
    fields = {"session": None, "agent_session": "", "waiting_for": {}, "answer": {}, "answered_at": None}
    fields["error"] = f"Re-queued by {actor.label} while it waited on runner {held_by}: starts afresh."[:NOTE_MAX]
    moved = _run_move(actor=actor, run=locked, to=S.QUEUED, fields=fields)
    _run_event("run.queued", moved, actor, requeued_from=held_by)
    transaction.on_commit(queue_wake)
    return moved
