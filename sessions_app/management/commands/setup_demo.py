import json

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand
from django.db import transaction

from board.models import Task
from board.services import campaign_create, task_create
from config.pages import PRODUCT_OWNERS
from sessions_app.actors import Actor
from sessions_app.keys import agent_get_or_create, api_key_create
from sessions_app.models import AgentApiKey

DEMO_TASKS = [
    ("Triage the failing nightly build", "P0", ["ci"]),
    ("Write the onboarding guide for new agents", "P1", ["docs"]),
    ("Add retries to the webhook sender", "P2", ["backend"]),
    ("Tidy the kanban colours", "P3", ["frontend"]),
]


DEMO_PRIORITIES = """# Q4 priorities

**Priority Level:** Medium

## P0 Critical
- [ ] Fix the login redirect loop @demo-agent #auth
  Users on Safari bounce between /login and /home.
- [x] Rotate the leaked staging key

## High
1. [ ] Speed up the board for large campaigns #performance

## Nice to have
* [ ] Dark mode for the board #frontend
"""

DEMO_CAMPAIGN = {
    "type": "marketing-campaign",
    "name": "Spring developer webinar",
    "priority": "medium",
    "deliverables": ["landing-page", "email-invite", "follow-up-survey"],
    "target_audience": "platform engineers",
    "leads": [{"name": "Ada Byron", "company": "Analytical Engines", "email": "ada@example.com", "score": 80}],
}


def _write_demo_inputs() -> list[str]:
    """A sample priority file and campaign definition, so the import pages have something to show."""
    written = []
    samples = [
        (settings.REPORTS_DIR / "demo-priorities.md", DEMO_PRIORITIES),
        (settings.TASK_DEFS_DIR / "demo-webinar.json", json.dumps(DEMO_CAMPAIGN, indent=2) + "\n"),
    ]
    for path, text in samples:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            path.write_text(text, encoding="utf-8")
            written.append(str(path))
    return written


class Command(BaseCommand):
    help = (
        "Prepare the embedded demo: an admin user (admin / admin) and a product owner (owner / owner), "
        "local use only; a demo agent with a fresh API key; a few tasks and a campaign the first time; "
        "a sample priority file and campaign definition to import. Safe to run again."
    )

    def add_arguments(self, parser):
        parser.add_argument("--port", default=None, help="Port to print in the URLs (default: $PORT or 8000).")
        parser.add_argument(
            "--welcome-file",
            default=None,
            help="Write the URLs and the demo key to this file (readable by you only) instead of printing them: "
            "`make run` has `serve --welcome-file` print them last, below the start-up logs.",
        )

    @transaction.atomic
    def handle(self, *args, port, welcome_file, **options):
        import os

        port = port or os.environ.get("PORT", "8000")
        User = get_user_model()
        if not User.objects.filter(username="admin").exists():
            User.objects.create_superuser("admin", "admin@example.com", "admin")
            self.stdout.write("Created the demo admin user: admin / admin (change it before sharing this machine).")
        if not User.objects.filter(username="owner").exists():
            owner = User.objects.create_user("owner", "owner@example.com", "owner")
            # get_or_create: an operator (or a test that flushed the tables) may have removed the group.
            owner.groups.add(Group.objects.get_or_create(name=PRODUCT_OWNERS)[0])
            self.stdout.write("Created the demo product owner: owner / owner.")
        for path in _write_demo_inputs():
            self.stdout.write(f"Wrote a sample import file: {path}")
        agent = agent_get_or_create(slug="demo-agent", display_name="Demo agent", provider="claude")
        issued = api_key_create(
            agent=agent, name="make run", scopes=[AgentApiKey.Scope.AGENT, AgentApiKey.Scope.ORCHESTRATE]
        )
        admin = User.objects.get(username="admin")
        if not Task.objects.exists():
            actor = Actor(user=admin)
            for title, priority, labels in DEMO_TASKS:
                task_create(actor=actor, title=title, priority=priority, labels=labels)
            campaign_create(
                actor=actor,
                type="marketing-campaign",
                name="Healthcare launch",
                priority="high",
                deliverables=["blog-post", "social-media", "email"],
                target_audience="enterprise-healthcare",
            )
            self.stdout.write(f"Created {Task.objects.count()} demo tasks and a campaign.")
        base = f"http://127.0.0.1:{port}"
        welcome = (
            "\nSwitchyard is running:\n"
            f"  board      {base}/   (owner / owner, or admin / admin)\n"
            f"  admin      {base}/admin/   (admin / admin)\n"
            f"  API docs   {base}/api/docs/\n"
            f"  health     {base}/healthz\n"
            f"  try it     curl -H 'Authorization: Bearer {issued.key}' {base}/api/v1/agents/me/\n"
            "Demo agent key (shown once):\n"
            f"{issued.key}\n"
        )
        if welcome_file:
            # Created readable by this user only: it holds a live key until serve prints and deletes it.
            fd = os.open(welcome_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(welcome)
            self.stdout.write("The URLs and the demo agent key follow once everything has started.")
        else:
            self.stdout.write(welcome.rstrip("\n"))
