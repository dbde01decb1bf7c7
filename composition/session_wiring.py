"""Board's and workspaces' part in a session's life, registered into sessions_app's hooks
(sessions_app/session_hooks.py) by composition's ``ready()``: sessions_app sits below them and may
not import them."""

from board.live import board_push_tasks
from board.models import Task
from board.services import task_claims_release_for_session, task_session_follow
from config.api.errors import DomainError
from sessions_app.models import Agent, AgentSession
from sessions_app.session_hooks import (
    agent_alive_hook_register,
    session_opened_hook_register,
    session_status_hook_register,
    session_task_gate_register,
)
from workspaces.worktrees.claims import worktree_leases_renew

Status = AgentSession.Status


def session_task_not_held_by_another(*, task: Task, agent: Agent) -> None:
    """A session names the task it works on (the board card links it): never one another agent holds."""
    if task.status == Task.Status.IN_PROGRESS and task.assignee_id not in (None, agent.pk):
        raise DomainError(
            f"Task {task.pk} is held by another agent; a session may name a task its own agent holds "
            "or one nobody holds.",
            code="conflict",
        )


def session_status_board(*, actor, session: AgentSession, previous: str, status: str) -> None:
    if Status.WAITING_FOR_INPUT in (previous, status):
        # Cards of the session's tasks carry a "waiting for input" badge.
        board_push_tasks(task_ids=session.claimed_tasks.values_list("id", flat=True))
    if status in (Status.CANCELLED, Status.FAILED):
        # Work the session can no longer do goes back to the board for someone else.
        task_claims_release_for_session(actor=actor, session=session)


def session_hooks_register() -> None:
    session_task_gate_register(name="board", gate=session_task_not_held_by_another)
    session_status_hook_register(name="board", hook=session_status_board)
    # A second session opened on a task its agent holds: the card shows the newest.
    session_opened_hook_register(name="board", hook=task_session_follow)
    # Every sign of life renews the agent's worktree leases: an agent the reaper counts as alive must
    # not lose its worktrees to lease expiry while it works.
    agent_alive_hook_register(name="worktree_leases", hook=worktree_leases_renew)
