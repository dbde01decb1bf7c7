"""Every page a person can reach, as data for the phone-width test (tests/browser/test_phone_width.py).

``PHONE_PAGES`` is the list the test walks: a name, a URL with ``{task}``, ``{session}``... filled
from what ``phone_world()`` made, and an optional step in the page (open the card's panel). A new
page joins the test by adding a line here (and, when it needs rows, a few to ``phone_world``).

The world is made to stress the width: a waiting permission request with a long command and a
long file path, long titles, labels and campaign names, runners with many labels, a held worktree.
"""

from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

from django.utils import timezone

from board.models import Task
from runners.models import Runner
from runners.services import runner_key_create
from sessions_app.models import AgentSession, StreamEvent
from tests.admin.factories import RepositoryFactory, WorktreeFactory
from tests.factories import (
    AgentFactory,
    CampaignFactory,
    SessionFactory,
    StreamEventFactory,
    TaskFactory,
    ToolCallFactory,
)
from usage.models import UsageRecord

LONG_COMMAND = (
    "git push --force origin feature/very-long-branch-name-for-the-phone-layout-check "
    "&& curl -sS https://example.invalid/a/really/long/path/that/never/breaks/by/itself/on/a/phone/screen"
)
LONG_PATH = "/home/dev/projects/webapp/src/components/settings/notifications/NotificationPreferencesPanel.tsx"
SUGGESTIONS = [
    {
        "type": "addRules",
        "rules": [{"toolName": "Bash", "ruleContent": "git push:*"}],
        "behavior": "allow",
        "destination": "localSettings",
    },
    {"type": "setMode", "mode": "acceptEdits", "destination": "session"},
]


@dataclass(frozen=True)
class PhonePage:
    name: str
    url: str  # format string over phone_world()'s ids
    open_card: bool = False  # click the waiting task's card and measure with its panel open
    who: str = "engineer"  # or "superuser" (the admin's pages), "anonymous" (the login page)
    top_bar: bool = True  # the app's own top bar (base.html), with its "Needs you" count


PHONE_PAGES = [
    PhonePage("login", "/accounts/login/", who="anonymous", top_bar=False),
    PhonePage("board", "/"),
    PhonePage("board-card-panel", "/", open_card=True),
    PhonePage("task-detail", "/tasks/{task}/"),
    PhonePage("priorities", "/priorities/"),
    PhonePage("campaigns", "/campaigns/"),
    PhonePage("sessions", "/sessions/"),
    PhonePage("session-permission", "/sessions/{session}/"),
    PhonePage("agents", "/agents/"),
    PhonePage("runners", "/runners/"),
    PhonePage("usage", "/admin/usage/usagerecord/", who="superuser", top_bar=False),
    PhonePage("worktrees", "/worktrees/"),
    PhonePage("admin", "/admin/", who="superuser", top_bar=False),
]


def permission_payload(command: str = LONG_COMMAND) -> dict:
    """An input_request as `switchyard hook` records Claude Code's PermissionRequest."""
    return {
        "hook": "PermissionRequest",
        "tool_name": "Bash",
        "tool_input": {"command": command, "description": "Force-push the branch and fetch the release notes"},
        "permission_suggestions": SUGGESTIONS,
        "question": "Allow Bash?",
        "choices": ["allow", "deny"],
    }


def waiting_session(*, task: Task | None, session_id: str, payload: dict, agent=None) -> AgentSession:
    """A session waiting on ``payload``, its question recorded as event 1."""
    session = SessionFactory(
        id=session_id,
        agent=agent or AgentFactory(slug="claude-phone", display_name="Claude on a phone", emoji="🤖"),
        task=task,
        status=AgentSession.Status.WAITING_FOR_INPUT,
        intent="Ship the notification preferences panel and push it",
        last_event_seq=1,
    )
    StreamEventFactory(session=session, seq=1, type=StreamEvent.Type.INPUT_REQUEST, payload=payload, client_id="p1")
    return session


def phone_world() -> dict:
    """The rows every page in PHONE_PAGES shows; returns the ids the URLs name."""
    agent = AgentFactory(slug="claude-phone", display_name="Claude on a phone", emoji="🤖")
    campaign = CampaignFactory(name="Spring developer webinar for platform engineers and their managers")
    task = TaskFactory(
        title="Ship the notification preferences panel with per-channel quiet hours",
        description="A long description. " * 20,
        status=Task.Status.IN_PROGRESS,
        labels=["frontend", "settings", "notifications", "accessibility"],
        campaign=campaign,
        assignee=agent,
    )
    for status in (Task.Status.BACKLOG, Task.Status.READY, Task.Status.REVIEW, Task.Status.DONE):
        TaskFactory(title=f"A {status} card with a title long enough to wrap twice on a phone", status=status)
    session = waiting_session(task=task, session_id="phone-asks", payload=permission_payload(), agent=agent)
    task.session = session
    task.save(update_fields=["session"])
    ToolCallFactory(session=session, tool_name="Edit", input_summary=LONG_PATH)
    runner = runner_key_create(name="build-box-with-a-long-name", labels=["linux", "gpu", "repo:webapp"], capacity=2)
    Runner.objects.filter(pk=runner[0].pk).update(
        status="online", providers=["demo", "claude", "codex"], host="build-box.example.internal",
        last_seen_at=timezone.now() - timedelta(seconds=3),
    )  # fmt: skip
    repository = RepositoryFactory(name="webapp", path="/srv/git/webapp-with-a-long-folder-name")
    WorktreeFactory(repository=repository, held=True, name="notification-preferences-panel-quiet-hours")
    UsageRecord.objects.create(
        agent=agent, session=session, task=task, model="claude-sonnet-4-5", input_tokens=120_000,
        output_tokens=9_000, cost_usd=Decimal("1.25"), occurred_at=timezone.now(),
        source=UsageRecord.Source.OTLP_LOG, idempotency_key="phone-1",
    )  # fmt: skip
    return {"task": task.pk, "session": session.pk, "campaign": campaign.pk}
