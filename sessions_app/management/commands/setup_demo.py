from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from board.models import Task
from board.services import campaign_create, task_create
from sessions_app.actors import Actor
from sessions_app.keys import agent_get_or_create, api_key_create
from sessions_app.models import AgentApiKey

DEMO_TASKS = [
    ("Triage the failing nightly build", "P0", ["ci"]),
    ("Write the onboarding guide for new agents", "P1", ["docs"]),
    ("Add retries to the webhook sender", "P2", ["backend"]),
    ("Tidy the kanban colours", "P3", ["frontend"]),
]


class Command(BaseCommand):
    help = (
        "Prepare the embedded demo: an admin user (admin / admin, local use only), a demo agent "
        "with a fresh API key, and a few tasks and a campaign the first time. Safe to run again."
    )

    def add_arguments(self, parser):
        parser.add_argument("--port", default=None, help="Port to print in the URLs (default: $PORT or 8000).")

    @transaction.atomic
    def handle(self, *args, port, **options):
        import os

        port = port or os.environ.get("PORT", "8000")
        User = get_user_model()
        if not User.objects.filter(username="admin").exists():
            User.objects.create_superuser("admin", "admin@example.com", "admin")
            self.stdout.write("Created the demo admin user: admin / admin (change it before sharing this machine).")
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
        self.stdout.write(
            "\nSwitchyard is starting:\n"
            f"  admin      {base}/admin/   (admin / admin)\n"
            f"  API docs   {base}/api/docs/\n"
            f"  health     {base}/healthz\n"
            f"  try it     curl -H 'Authorization: Bearer {issued.key}' {base}/api/v1/agents/me/\n"
            "Demo agent key (shown once):\n"
        )
        self.stdout.write(issued.key)
