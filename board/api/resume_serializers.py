"""A resume's output (board/resume.py): the session endpoint's answer (composition/api/resume_views.py),
and what a runner's start answer carries (runners/api/views.py). Here, beside the read, because it
nests the outputs of the apps that read spans, and runners, above board, use it too."""

from rest_framework import serializers

from board.api.serializers import TaskOutput
from board.resume import ResumeState
from ledger.api.serializers import ToolCallOutput
from sessions_app.api.serializers import CheckpointOutput, MilestoneOutput, SessionOutput
from workspaces.api.worktree_serializers import WorktreeOutput


class ResumeOutput(serializers.Serializer):
    session = SessionOutput()
    status = serializers.CharField()
    checkpoint = CheckpointOutput(allow_null=True)
    open_tool_calls = ToolCallOutput(
        many=True,
        help_text="Running tool calls of the session and of its subagents (child sessions, two levels); "
        "each names its session.",
    )
    milestones = MilestoneOutput(many=True)
    claimed_tasks = TaskOutput(many=True)
    claimed_worktrees = WorktreeOutput(many=True, help_text="Worktrees this agent holds on a lease not yet expired.")
    last_event_seq = serializers.IntegerField()


def resume_body(state: ResumeState) -> dict:
    """ResumeOutput's body; a runner's start answer carries it too (runners/api/views.py)."""
    return {
        "session": SessionOutput(state.session).data,
        "status": state.session.status,
        "checkpoint": CheckpointOutput(state.checkpoint).data if state.checkpoint else None,
        "open_tool_calls": ToolCallOutput(state.open_tool_calls, many=True).data,
        "milestones": MilestoneOutput(state.milestones, many=True).data,
        "claimed_tasks": TaskOutput(state.claimed_tasks, many=True).data,
        "claimed_worktrees": WorktreeOutput(state.claimed_worktrees, many=True).data,
        "last_event_seq": state.last_event_seq,
    }
