"""What a run's status report does besides the move (SPEC §8, ``POST /runs/{id}/status/``): the
session, the task's claim and the per-run key.

- -> starting: the run's session is opened (once; a restart keeps it), the task is claimed for the
  run's agent (``<provider>@<runner>``), and a per-run key is minted: scope ``agent``, bound to the
  session, the older keys of the run revoked. The key is shown once, in the answer.
- -> succeeded: the summary becomes a milestone of the session and rides on ``run.finished``; the
  task goes to review, the session is completed.
- -> failed: the task fails with the error; the session fails.
- -> cancelled: the task stays where the person put it (given back to ready only if the run's agent
  still holds it in progress); the session is cancelled.
- -> lost (runners/leases.py): the task is given back, the session fails.
- -> waiting (issue 26 §2): the agent deferred a tool call to a person and exited. The run records
  what it waits for (the session's Allow / Deny question: runners/waiting_questions.py) and, if a
  person answered already, the answer; its keys are revoked (no agent is left to use them). The
  task, its claim, the worktree and the session (waiting for input) stay the run's;
  runners/run_waiting.py takes it on from there.
Every end revokes the run's keys and ends its agent's claim on the run's worktree (a lost run's
runner cannot give it back, and the attempt queued to resume it needs it). All of it happens in the
transaction of the move, under the run's row lock; the ledger events and pushes those services queue
go out after commit.

The task and session are changed as the run's agent, through the board's and the sessions'
services, so their rules and events are the ones any agent's work has. A task or session a person
(or the agent itself) already moved on is left as it is: the run's end never fights them.
"""

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from board.models import Task
from board.resume import ResumeState, session_resume
from board.services import task_claim, task_complete, task_fail, task_release
from config.actors import Actor
from config.api.errors import LEASE_LOST, DomainError
from config.idempotency import IncomingItem, canonical_sha256
from runners.identities import run_agent_get_or_create
from runners.models import Run
from runners.queue_wake import queue_wake
from runners.services import (
    RUN_TRANSITIONS,
    run_may_drive,
    run_refuse_stale,
    run_transition,
    run_unacknowledged_note,
)
from runners.waiting_questions import waiting_answer, waiting_for_describe, waiting_question
from sessions_app.keys import api_key_cache_clear, api_key_create
from sessions_app.models import AgentApiKey, AgentSession
from sessions_app.services import ALLOWED_TRANSITIONS, milestone_record, session_open, session_transition
from workspaces.models import Worktree
from workspaces.worktrees.claims import worktree_claims_end

S = Run.Status
# What each terminal status of the run makes of its session.
SESSION_END = {
    S.SUCCEEDED: AgentSession.Status.COMPLETED,
    S.FAILED: AgentSession.Status.FAILED,
    S.CANCELLED: AgentSession.Status.CANCELLED,
    S.LOST: AgentSession.Status.FAILED,
}
ERROR_MAX = 10_000


@dataclass
class Report:
    run: Run
    changed: bool  # False for a repeated terminal report
    agent_key: str | None = None  # the per-run key, shown once (-> starting)
    resume: ResumeState | None = None  # what the agent resumes from (-> starting), if anything
    # A report refused after what it refused was written (a start on a task that moved on ends the
    # run): raised by run_report once that is committed.
    refusal: DomainError | None = None


def _agent_actor(run: Run) -> Actor:
    return Actor(agent=run.agent)


def run_report(*, actor: Actor, run: Run, attempt: int, status: str, **fields) -> Report:
    """The holder reports ``run`` moved to ``status`` (its attempt fences it); see the module docstring.

    A terminal status reported again with the same attempt answers as before and changes nothing.
    ``cancelled`` is refused unless a cancel was asked for (or staff report it). A start on a task
    that moved on (done, or held by someone else) is refused, and the run ended with that reason.
    """
    report = _report(actor=actor, run=run, attempt=attempt, status=status, fields=fields)
    if report.refusal is not None:
        raise report.refusal  # after the commit of the run's end: it must not stay active forever
    return report


@transaction.atomic
def _report(*, actor: Actor, run: Run, attempt: int, status: str, fields: dict) -> Report:
    locked = Run.objects.select_for_update(of=("self",)).select_related("runner", "agent").get(pk=run.pk)
    # The order of run_transition's checks: the fence, then who, then what.
    run_refuse_stale(locked, attempt)
    if not run_may_drive(actor, locked.runner):
        raise DomainError(f"Run {locked.pk} is not held by this runner.", code="forbidden")
    if locked.status == S.LOST and not (actor.is_staff or actor.system):
        # Its lease lapsed: whatever the runner has to say about it comes too late.
        raise DomainError(
            f"Run {locked.pk} was lost: its lease lapsed before this report; drop it.",
            code="conflict",
            extra={"code": LEASE_LOST, "run": locked.pk, "attempt": locked.attempt},
        )
    if status == locked.status and status in (*Run.TERMINAL, S.WAITING):
        return Report(run=locked, changed=False)  # a retry of the report that ended it (or parked it)
    cancel_asked = locked.cancel_requested_at is not None or actor.is_staff or actor.system
    if status == S.CANCELLED and not cancel_asked and status in RUN_TRANSITIONS[locked.status]:
        raise DomainError(
            f"Run {locked.pk} was not asked to stop; report how it ended instead.",
            code="conflict",
            extra={"status": locked.status},
        )
    if status == S.STARTING:
        return _start(actor=actor, run=locked, attempt=attempt, fields=fields)
    if status == S.FAILED and locked.status == S.ASSIGNED:
        return _unacknowledged(actor=actor, run=locked, attempt=attempt, fields=fields)
    if status == S.WAITING:
        return _wait(actor=actor, run=locked, attempt=attempt, fields=fields)
    if "deferred" in fields:
        raise DomainError("`deferred` goes with status waiting only.", extra={"errors": {"deferred": ["Unexpected."]}})
    moved = run_transition(actor=actor, run=locked, to=status, attempt=attempt, **fields)
    if status in Run.TERMINAL:
        run_end_effects(run=moved, actor=_agent_actor(moved))
    return Report(run=moved, changed=True)


def _start(*, actor: Actor, run: Run, attempt: int, fields: dict) -> Report:
    restart = run.status in (S.STARTING, S.RUNNING)
    if run.agent_id is None and run.runner is not None:
        # Handed out by other means than the poll (the system, a test): its agent is made now.
        fields = {**fields, "agent": run_agent_get_or_create(provider=run.provider, runner=run.runner)}
        run.agent = fields["agent"]
    task = Task.objects.get(pk=run.task_id)
    if S.STARTING in RUN_TRANSITIONS[run.status] and not (
        task.status == Task.Status.READY
        or (task.status == Task.Status.IN_PROGRESS and task.assignee_id == run.agent_id)
    ):
        # Checked before the session is opened: its folder would outlive a rollback.
        held = " held by another agent" if task.assignee_id not in (None, run.agent_id) else ""
        return _start_refused(actor=actor, run=run, attempt=attempt, task=task, why=f"{task.status}{held}")
    # Acknowledged: from now on the lease is the full one, renewed by the runner's heartbeats.
    fields = {**fields, "lease_expires_at": timezone.now() + timedelta(seconds=settings.RUNNER_LEASE_SECONDS)}
    if run.error:
        fields["error"] = ""  # why an earlier handing out went unacknowledged: told while it was queued
    moved = run_transition(actor=actor, run=run, to=S.STARTING, attempt=attempt, **fields)
    agent_actor = _agent_actor(moved)
    session = moved.session
    if session is None:
        session, _ = session_open(
            actor=agent_actor,
            agent=moved.agent,
            intent=task.title,
            labels=["run"],
            task=task,
            status=AgentSession.Status.RUNNING,
            metadata=_session_metadata(moved),
        )
        moved.session = session
        moved.save(update_fields=["session", "updated_at"])
    task_claim(actor=agent_actor, agent=moved.agent, task=task, session=session)
    key = run_key_mint(run=moved)
    if restart:
        resume = session_resume(session=session)
    elif moved.resumes_id is not None and moved.resumes.session_id is not None:
        resume = session_resume(session=moved.resumes.session)
    else:
        resume = None
    return Report(run=moved, changed=True, agent_key=key, resume=resume)


def _wait(*, actor: Actor, run: Run, attempt: int, fields: dict) -> Report:
    """running -> waiting: its agent deferred the tool call ``fields["deferred"]`` names (its id and
    tool) to a person and exited. Refused (409) when the session holds no Allow / Deny question:
    nobody could ever answer it, so the runner reports how the run ended instead."""
    fields = dict(fields)
    deferred = fields.pop("deferred", None) or {}
    if S.WAITING not in RUN_TRANSITIONS[run.status]:
        raise DomainError(
            f"Run {run.pk} cannot go from {run.status} to waiting.", code="conflict", extra={"status": run.status}
        )
    if run.cancel_requested_at is not None:
        # A person asked it to stop while its agent deferred: it ends here, as the stop asked.
        moved = run_transition(actor=actor, run=run, to=S.CANCELLED, attempt=attempt, **fields)
        run_end_effects(run=moved, actor=_agent_actor(moved))
        return Report(run=moved, changed=True)
    question = waiting_question(session=run.session) if run.session_id is not None else None
    if question is None:
        raise DomainError(
            f"Run {run.pk} cannot wait: its session has no Allow / Deny question for a person to answer; "
            "report how it ended instead.",
            code="conflict",
            extra={"status": run.status},
        )
    waiting_for = waiting_for_describe(
        question=question,
        runner=run.runner.name,
        tool_use_id=str(deferred.get("tool_use_id") or ""),
        tool_name=str(deferred.get("tool_name") or ""),
    )
    # Answered already (between the hook's question and this report): it resumes at once.
    answer = waiting_answer(session=run.session, question_seq=question.seq)
    fields.update(waiting_for=waiting_for, answer=answer or {}, answered_at=timezone.now() if answer else None)
    moved = run_transition(actor=actor, run=run, to=S.WAITING, attempt=attempt, **fields)
    run_keys_revoke(run=moved)  # no agent is left to use them; the resume mints a new one
    if answer:
        transaction.on_commit(queue_wake)
    return Report(run=moved, changed=True)


def _session_metadata(run: Run) -> dict:
    metadata = {"run": run.pk, "runner": run.runner.name, "provider": run.provider}
    if run.kind != Run.Kind.WORK:
        metadata["kind"] = run.kind
    if run.kind == Run.Kind.CONTINUE and run.resumes_id is not None:
        metadata["continues"] = run.resumes.session_id  # the session page links the conversation's earlier part
    return metadata


def _unacknowledged(*, actor: Actor, run: Run, attempt: int, fields: dict) -> Report:
    """Failed before it was acknowledged (never reported starting): the runner had no record of it
    (killed after its long poll answered, restarted with the same root) or could not take it. Back
    to the queue for any runner, as a lapsed assignment goes (runners/leases.py), attempt + 1, the
    card saying so; from attempt RUNNER_UNACKNOWLEDGED_MAX_ATTEMPTS on the failure stands."""
    reported = (fields.get("error") or "").strip()
    if run.attempt >= settings.RUNNER_UNACKNOWLEDGED_MAX_ATTEMPTS:
        tail = f"Failed before it started, at attempt {run.attempt}: not queued again."
        fields = {**fields, "error": f"{reported}\n{tail}".strip()}
        moved = run_transition(actor=actor, run=run, to=S.FAILED, attempt=attempt, **fields)
        run_end_effects(run=moved, actor=_agent_actor(moved))
        return Report(run=moved, changed=True)
    why = f"its runner reported {reported.splitlines()[0][:150]!r}" if reported else "its runner reported it failed"
    note = run_unacknowledged_note(run=run, why=why)
    if run.answered_at is not None and run.waiting_for:
        # An answered waiting run: only its runner has its session, so it waits for that one again.
        return Report(run=run_transition(actor=actor, run=run, to=S.WAITING, attempt=attempt, error=note), changed=True)
    return Report(run=run_transition(actor=actor, run=run, to=S.QUEUED, attempt=attempt, error=note), changed=True)


def _start_refused(*, actor: Actor, run: Run, attempt: int, task: Task, why: str) -> Report:
    """The task moved on while the run waited (someone else did it, a person moved it): the run can
    never start, so it ends now, cancelled if a stop was asked for, else failed, with the reason."""
    reason = f"Task {task.pk} is {why}; a run starts on a ready task."
    to = S.CANCELLED if run.cancel_requested_at is not None else S.FAILED
    moved = run_transition(
        actor=actor, run=run, to=to, attempt=attempt, agent=run.agent, error=f"Could not start: {reason}"
    )
    run_end_effects(run=moved, actor=_agent_actor(moved))
    refusal = DomainError(
        f"{reason} Run {moved.pk} ended {to}.",
        code="conflict",
        extra={"task": task.pk, "task_status": task.status, "run": moved.pk, "run_status": to},
    )
    return Report(run=moved, changed=True, refusal=refusal)


def run_key_mint(*, run: Run) -> str:
    """A new per-run key for the run's agent, bound to its session; the run's older keys are revoked."""
    run_keys_revoke(run=run)
    issued = api_key_create(
        agent=run.agent, name=f"run {run.pk} attempt {run.attempt}", scopes=[AgentApiKey.Scope.AGENT]
    )
    AgentApiKey.objects.filter(pk=issued.api_key.pk).update(session=run.session)
    return issued.key


def run_keys_revoke(*, run: Run) -> int:
    """Revoke every key bound to the run's session; refused at once in this process, within
    API_KEY_CACHE_SECONDS in the others."""
    if run.session_id is None:
        return 0
    revoked = AgentApiKey.objects.filter(session_id=run.session_id, revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )
    api_key_cache_clear()
    return revoked


def run_end_effects(*, run: Run, actor: Actor) -> None:
    """The task, session and keys of a run that just ended (run.status terminal). Caller holds the
    transaction of the move. ``actor`` acts on the task and session: the run's agent, or the system."""
    session = run.session
    task = Task.objects.get(pk=run.task_id)
    held = task.status == Task.Status.IN_PROGRESS and run.agent_id is not None and task.assignee_id == run.agent_id
    if run.status == S.SUCCEEDED and session is not None and run.summary and not session.is_terminal:
        _milestone(actor=actor, session=session, text=summary_text(run.summary))
    if held and run.kind == Run.Kind.REVIEW and run.status != S.LOST:
        # A review run read the change: however it ended, the change is still there to review.
        task_complete(actor=actor, task=task, review=True)
    elif held and run.status == S.SUCCEEDED:
        task_complete(actor=actor, task=task, review=True)
    elif held and run.status == S.FAILED:
        task_fail(actor=actor, task=task, error=_exit_error(run))
    elif held and run.status in (S.CANCELLED, S.LOST):
        task_release(actor=actor, task=task)  # lost: for the run queued again to resume it
    if session is not None:
        _session_end(actor=actor, session=session, status=SESSION_END[run.status], reason=f"run {run.pk} {run.status}")
    run_worktrees_free(actor=actor, run=run, task=task)
    run_keys_revoke(run=run)


def run_hand_back_effects(*, run: Run, actor: Actor, reason: str) -> None:
    """A waiting run a person re-queues for any runner (its own is gone): what its agent held ends as
    at a cancel (the task given back, the session cancelled, the worktree claims ended, the keys
    revoked), so the next attempt starts afresh, with an agent, session and worktree of its runner."""
    task = Task.objects.get(pk=run.task_id)
    if task.status == Task.Status.IN_PROGRESS and run.agent_id is not None and task.assignee_id == run.agent_id:
        task_release(actor=actor, task=task)
    if run.session is not None:
        _session_end(actor=actor, session=run.session, status=AgentSession.Status.CANCELLED, reason=reason)
    run_worktrees_free(actor=actor, run=run, task=task)
    run_keys_revoke(run=run)


def run_worktrees_free(*, actor: Actor, run: Run, task: Task) -> list[int]:
    """End the claims the run's agent holds on the run's worktree: the one named for its task in the
    task's repository (``<type>-<task>``: runner/workdir.py), or the folder it reported working in.
    A runner gives it back itself when its run ends; a lost run's runner is gone, and its claim would
    keep the next attempt, on another runner, out for WORKTREE_LEASE_TTL_SECONDS. The agent is shared
    by the runner's runs of one provider, but each of them works another task, so another worktree."""
    mine = Q(repository_id=task.repository_id, name=str(task.pk)) if task.repository_id else None
    if run.workdir:
        mine = Q(real_path=run.workdir) if mine is None else mine | Q(real_path=run.workdir)
    if run.agent_id is None or mine is None:
        return []
    return worktree_claims_end(
        actor=actor, agent=run.agent, worktrees=Worktree.objects.filter(mine), reason=f"run {run.pk} {run.status}"
    )


def _exit_error(run: Run) -> str:
    """The task's error: the exit code, then what the runner sent (the last lines of the log)."""
    head = f"exit code {run.exit_code}" if run.exit_code is not None else ""
    if head and run.error.startswith(head):
        head = ""  # the runner said it already
    return "\n".join(part for part in (head, run.error) if part) or "The run failed."


def _session_end(*, actor: Actor, session: AgentSession, status: str, reason: str) -> None:
    session = AgentSession.objects.get(pk=session.pk)
    if session.is_terminal:
        return  # the agent (or a person) ended it already
    if status not in ALLOWED_TRANSITIONS[session.status]:
        # planning cannot complete directly: it was running, as far as anyone can tell
        session, _ = session_transition(actor=actor, session=session, status=AgentSession.Status.RUNNING, reason=reason)
    session_transition(actor=actor, session=session, status=status, reason=reason)


def _milestone(*, actor: Actor, session: AgentSession, text: str) -> None:
    data = {"text": text}
    milestone_record(
        actor=actor, session=session, item=IncomingItem(index=0, data=data, body_sha256=canonical_sha256(data))
    )


def summary_text(summary: dict) -> str:
    """One line for people: ``Run finished: 2 commits ahead, 1 file changed (a.py), patch run-12.patch``."""
    parts = []
    if summary.get("commits_ahead") is not None:
        parts.append(f"{summary['commits_ahead']} commit(s) ahead")
    files = summary.get("files_changed") or []
    if files:
        shown = ", ".join(str(name) for name in files[:10]) + (", ..." if len(files) > 10 else "")
        parts.append(f"{len(files)} file(s) changed ({shown})")
    if summary.get("patch"):
        parts.append(f"patch {summary['patch']}")
    artifacts = summary.get("artifacts") or []
    if artifacts:
        parts.append("work products: " + ", ".join(str(name) for name in artifacts[:10]))
    return ("Run finished: " + ", ".join(parts) if parts else "Run finished.")[:2000]
