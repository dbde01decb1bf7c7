"""What a restarted agent picks up: its session's last checkpoint and milestones, its open tool calls,
the tasks and worktrees it holds. It reads sessions_app, ledger, workspaces and board, so it lives in
the lowest app that sees all four (the layers in pyproject); runners use it too (run_lifecycle.py)."""

from dataclasses import dataclass

from django.db.models import Q
from django.utils import timezone

from board.models import Task
from ledger.models import ToolInvocation
from sessions_app.models import AgentSession, Checkpoint, Milestone
from workspaces.models import Worktree

RESUME_MILESTONES = 20


@dataclass
class ResumeState:
    session: AgentSession
    checkpoint: Checkpoint | None
    open_tool_calls: list[ToolInvocation]
    milestones: list[Milestone]
    claimed_tasks: list
    claimed_worktrees: list
    last_event_seq: int


def session_resume(*, session: AgentSession) -> ResumeState:
    """What a restarted agent picks up. Open tool calls include its subagents' (child sessions and
    theirs: a Claude Code subagent's calls are in a session of its own, see the hook). Worktree
    claims belong to the agent, not the session: the ones listed are those whose lease has not
    expired (a lapsed one may already be someone else's)."""
    checkpoint = Checkpoint.objects.filter(session=session).order_by("-seq").first()
    # One query: the session, its children and grandchildren (subagents don't nest deeper).
    tree = Q(session=session) | Q(session__parent=session) | Q(session__parent__parent=session)
    open_calls = list(
        ToolInvocation.objects.filter(tree, status=ToolInvocation.Status.RUNNING).order_by("started_at", "id")
    )
    milestones = list(Milestone.objects.filter(session=session).order_by("-created_at", "-id")[:RESUME_MILESTONES])
    milestones.reverse()
    claimed = list(
        Task.objects.filter(assignee_id=session.agent_id, status=Task.Status.IN_PROGRESS, session=session).order_by(
            "id"
        )
    )
    worktrees = list(
        Worktree.objects.filter(
            holder_id=session.agent_id, status=Worktree.Status.ACTIVE, lease_expires_at__gte=timezone.now()
        )
        .select_related("repository", "holder")
        .order_by("id")
    )
    return ResumeState(
        session=session,
        checkpoint=checkpoint,
        open_tool_calls=open_calls,
        milestones=milestones,
        claimed_tasks=claimed,
        claimed_worktrees=worktrees,
        last_event_seq=session.last_event_seq,
    )
