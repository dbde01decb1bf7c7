"""The budget tests' common ground: an agent's session at work on a campaign's task, and a budget at each level."""

from board.models import Task
from sessions_app.models import AgentSession
from tests.factories import CampaignFactory, SessionFactory, TaskFactory
from usage.models import Budget

Scope = Budget.Scope
LEVELS = ["task", "agent", "campaign", "day", "agent-day"]


def work_session(agent, *, session_id: str) -> AgentSession:
    """The agent's Claude Code session on a task of the campaign "Launch", in progress."""
    task = TaskFactory(
        title="Ship it", campaign=CampaignFactory(name="Launch"), status=Task.Status.IN_PROGRESS, assignee=agent
    )
    return SessionFactory(agent=agent, id=session_id, task=task, status=AgentSession.Status.RUNNING)


def budget_for(level: str, session: AgentSession, **limits) -> Budget:
    """A budget at ``level`` (one of LEVELS) over the session's work, with ``limits``."""
    targets = {
        "task": {"scope": Scope.TASK, "task": session.task},
        "agent": {"scope": Scope.AGENT, "agent": session.agent},
        "campaign": {"scope": Scope.CAMPAIGN, "campaign": session.task.campaign},
        "day": {"scope": Scope.DAY},
        "agent-day": {"scope": Scope.DAY, "agent": session.agent},
    }
    return Budget.objects.create(**targets[level], **limits)
