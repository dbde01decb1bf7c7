"""A run that waits for a person holds no process (SPEC §8, issue 26 §2).

When a Claude Code run's hook needs a person (a permission Claude Code would ask for, the tool
policy's "ask", an exceeded budget), it records the question, answers PreToolUse with ``"defer"``,
and Claude Code exits with the call in its result (``deferred_tool_use``). The runner reports the run
``waiting`` (runners/run_lifecycle.py): no agent, no capacity taken, no lease to expire; its runner
keeps the worktree and Claude Code's session on disk, and the session waits for input.

- The answer (the session page's or the card's Allow / Deny, a budget raised: anything that answers
  the session's question through ``session_answer_input``) moves the session back to running;
  ``run_waiting_answered``, a status hook of sessions_app's, records it on the run (``answer``,
  ``answered_at``) and wakes the runners' long polls. However late: nothing expires a waiting run.
- The long poll (runners/dispatch.py) hands an answered run to the runner holding it, and only to
  it (waiting -> assigned, attempt + 1), with the decision (``deferred`` in the assignment); the
  runner resumes the session (``--resume``) and its hook answers the deferred call's PreToolUse with
  the decision: allowed, the tool runs; denied, the agent is told why. While that runner is offline
  the run stays waiting, the card saying "waiting for runner <name>".
- A person may cancel it (``run_stop``: at once, no agent to stop) or re-queue it for any runner
  (``run_requeue_elsewhere``: attempt + 1, a fresh session and worktree there).
- ``run_waiting_answer`` answers by the run (``POST /runs/{id}/answer/``): a second answer, or one
  after the run was cancelled, is a 409 naming the run's state (the pages' answers find the session
  no longer waiting, and say so).
"""

from django.db import transaction
from django.utils import timezone

from board.live import board_push_tasks
from config.actors import SYSTEM, Actor
from config.api.errors import DomainError
from runners.models import Run
from runners.queue_wake import queue_wake
from runners.run_lifecycle import run_end_effects, run_hand_back_effects
from runners.services import require_run_starter, run_cancel, run_waiting_requeue
from runners.waiting_questions import waiting_answer
from sessions_app.input_requests import session_answer_input
from sessions_app.models import AgentSession
from sessions_app.session_hooks import session_status_hook_register

S = Run.Status


def run_waiting_answered(*, actor: Actor, session: AgentSession, previous: str, status: str) -> None:
    """sessions_app's status hook: a session that waited for input runs again. If a waiting run's
    question was answered Allow or Deny, the answer is recorded on the run, which resumes. Runs in
    the transaction of the session's move (the answer's)."""
    if previous != AgentSession.Status.WAITING_FOR_INPUT or status != AgentSession.Status.RUNNING:
        return
    unanswered = Run.objects.filter(session_id=session.pk, status=S.WAITING, answered_at__isnull=True)
    run = unanswered.only("pk", "task_id", "waiting_for").first()
    if run is None:
        return
    answer = waiting_answer(session=session, question_seq=run.waiting_for.get("question_seq"))
    if answer is None:
        return  # moved on without an Allow / Deny (a text answer): not this run's question
    # A conditional UPDATE, not a row lock taken after the session's: a cancel locks the run first.
    now = timezone.now()
    if not unanswered.filter(pk=run.pk).update(answer=answer, answered_at=now, updated_at=now):
        return  # cancelled or re-queued meanwhile
    board_push_tasks(task_ids=[run.task_id])
    transaction.on_commit(queue_wake)  # a long poll in this process hands it out at once


def run_waiting_register() -> None:
    session_status_hook_register(name="runners_waiting", hook=run_waiting_answered)


@transaction.atomic
def run_stop(*, actor: Actor, run: Run) -> Run:
    """Stop a run from the API, a page or a card's move: ``run_cancel``; a waiting run, which has no
    agent to stop, ends cancelled at once, its task given back and its session cancelled."""
    was = Run.objects.select_for_update(of=("self",)).only("status").get(pk=run.pk).status
    stopped = run_cancel(actor=actor, run=run)
    if was == S.WAITING:
        run_end_effects(run=stopped, actor=Actor(agent=stopped.agent) if stopped.agent_id else SYSTEM)
    return stopped


@transaction.atomic
def run_requeue_elsewhere(*, actor: Actor, run: Run) -> Run:
    """A person queues a waiting run for any runner (the one holding its worktree is gone, or they
    would rather not wait for it): what it held ends, and it starts afresh there, attempt + 1."""
    require_run_starter(actor=actor, what="Re-queueing runs")
    locked = Run.objects.select_for_update(of=("self",)).select_related("runner", "agent", "session").get(pk=run.pk)
    if locked.status != S.WAITING:
        raise DomainError(
            f"Run {locked.pk} is {locked.status}, not waiting: only a waiting run is re-queued.",
            code="conflict",
            extra={"status": locked.status},
        )
    agent_actor = Actor(agent=locked.agent) if locked.agent_id else SYSTEM
    run_hand_back_effects(run=locked, actor=agent_actor, reason=f"run {locked.pk} re-queued by {actor.label}")
    return run_waiting_requeue(actor=actor, run=locked)


@transaction.atomic
def run_waiting_answer(*, actor: Actor, run: Run, decision: str, message: str = "") -> Run:
    """A person (or an orchestrating agent) answers what a waiting run waits for, by the run: the
    session's question gets ``decision`` (allow, deny) and ``message`` through the session's own
    answer service, and the run resumes. 409 naming the run's state when it waits for no answer."""
    require_run_starter(actor=actor, what="Answering runs")
    locked = Run.objects.select_for_update(of=("self",)).select_related("session", "runner").get(pk=run.pk)
    if locked.status != S.WAITING or locked.answered_at is not None or locked.session is None:
        state = locked.status
        if locked.status == S.WAITING and locked.answered_at is not None:
            state += f", answered already ({locked.answer.get('decision')} by {locked.answer.get('answered_by')})"
        raise DomainError(
            f"Run {locked.pk} is {state}: it waits for no answer.",
            code="conflict",
            extra={"status": locked.status, "answered": locked.answered_at is not None},
        )
    if decision not in ("allow", "deny"):
        raise DomainError("decision must be allow or deny.", extra={"errors": {"decision": ["Invalid."]}})
    question = str(locked.waiting_for.get("question_seq") or "")
    session_answer_input(actor=actor, session=locked.session, answer=message, decision=decision, question_seq=question)
    locked.refresh_from_db()
    return locked
